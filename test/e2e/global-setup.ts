import { randomBytes } from 'node:crypto';
import { E2eEnvironment, ServiceProcess, freePort, startProcess, waitForApi } from './support/service';

declare global {
  // eslint-disable-next-line no-var
  var __SLUICE_E2E__: { processes: ServiceProcess[] } | undefined;
}

/**
 * Starts the api and the worker as separate processes against the local PostgreSQL and Redis,
 * under a key prefix of this run's own, and tells the tests where they are through the env.
 */
export default async function globalSetup(): Promise<void> {
  const port = await freePort();
  const env: E2eEnvironment = {
    baseUrl: `http://127.0.0.1:${port}`,
    databaseUrl: process.env.E2E_DATABASE_URL ?? 'postgresql://root@127.0.0.1:5432/test',
    redisUrl: process.env.E2E_REDIS_URL ?? 'redis://127.0.0.1:6379',
    keyPrefix: `sluice-e2e-${randomBytes(4).toString('hex')}`,
    jwtSecret: randomBytes(24).toString('hex'),
    adminUser: 'e2e_admin',
    adminPassword: randomBytes(12).toString('base64url'),
  };
  const common = {
    DATABASE_URL: env.databaseUrl,
    REDIS_URL: env.redisUrl,
    SLUICE_KEY_PREFIX: env.keyPrefix,
    SLUICE_JWT_SECRET: env.jwtSecret,
    SLUICE_ADMIN_USER: env.adminUser,
    SLUICE_ADMIN_PASSWORD: env.adminPassword,
    SLUICE_WORKER_THREADS: '2',
    SLUICE_PRODUCER_SILENCE_MS: '3000',
  };
  const worker = startProcess('worker', common);
  const api = startProcess('api', { ...common, PORT: String(port), HOST: '127.0.0.1' });
  globalThis.__SLUICE_E2E__ = { processes: [api, worker] };
  try {
    await waitForApi(env.baseUrl, api);
  } catch (err) {
    await Promise.all([api.stop(), worker.stop()]);
    throw new Error(`${(err as Error).message}\nworker output:\n${worker.output()}`);
  }
  process.env.SLUICE_E2E = JSON.stringify(env);
}
