import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { e2eEnv } from './client';
import { ServiceProcess, freePort, startProcess, waitForApi } from './service';

/** A second api process beside the suite's own, on the same database (and Redis in cluster). */
export interface ExtraApi {
  baseUrl: string;
  pid: number;
  output: () => string;
  stop: () => Promise<void>;
}

/**
 * Starts another api on the suite's database with the same JWT secret and admin, so tokens of
 * one work on the other. Cluster: same Redis and (unless overridden) key prefix, so the suite's
 * worker runs its queries. Standalone: its own in-process queue and threads, over the embedded
 * PostgreSQL's superuser login.
 */
export async function startExtraApi(overrides: Record<string, string> = {}): Promise<ExtraApi> {
  const env = e2eEnv();
  const port = await freePort();
  const dataDir = join(tmpdir(), `sluice-extra-${randomBytes(4).toString('hex')}`);
  const common: Record<string, string> = {
    ...env.serviceEnv,
    SLUICE_JWT_SECRET: env.jwtSecret,
    SLUICE_ADMIN_USER: env.adminUser,
    SLUICE_ADMIN_PASSWORD: env.adminPassword,
    // Keeps the bootstrap admin's role as the suite set it.
    SLUICE_ADMIN_ROLE: env.adminRole,
    SLUICE_WORKER_THREADS: '1',
    PORT: String(port),
    HOST: '127.0.0.1',
  };
  const modeEnv: Record<string, string> =
    env.mode === 'cluster'
      ? { ...env.redisEnv, SLUICE_KEY_PREFIX: env.keyPrefix }
      : { SLUICE_DATA_DIR: dataDir };
  const proc: ServiceProcess = startProcess('api', { ...common, ...modeEnv, ...overrides });
  const baseUrl = `http://127.0.0.1:${port}`;
  try {
    await waitForApi(baseUrl, proc, 90_000);
  } catch (err) {
    await proc.stop();
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  return {
    baseUrl,
    pid: proc.child.pid!,
    output: proc.output,
    stop: async () => {
      await proc.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
