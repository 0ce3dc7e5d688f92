import Redis from 'ioredis';
import { rmSync } from 'node:fs';
import { Client } from 'pg';
import { dropServiceDatabase } from './support/roles';
import { keysMatching, unlinkEach } from './support/redis';
import { E2eEnvironment } from './support/service';

/** Stops the processes and removes every Redis key and the admin user of this run. */
export default async function globalTeardown(): Promise<void> {
  const state = globalThis.__SLUICE_E2E__;
  if (state) await Promise.all(state.processes.map((p) => p.stop()));
  // Its own Redis (SLUICE_E2E_REDIS cluster or sentinel): nothing to clean, it all stops.
  await state?.redis?.stop();
  await state?.spool?.stop();
  if (state?.dataDir) rmSync(state.dataDir, { recursive: true, force: true });
  const raw = process.env.SLUICE_E2E;
  if (!raw) return;
  const env = JSON.parse(raw) as E2eEnvironment;
  for (const file of env.logFiles ?? []) rmSync(file, { force: true });
  if (env.mode === 'cluster') {
    const db = new Client({ connectionString: env.databaseUrl });
    await db.connect();
    await db
      .query('DELETE FROM sluice.users WHERE username = $1', [env.adminUser])
      .catch(() => undefined);
    await db.end();
  }
  await dropServiceDatabase(env.local).catch((err: Error) => {
    // Roles a failed spec left behind keep the control login granted: say so, do not fail.
    console.warn(`could not drop the suite's roles: ${err.message}`);
  });
  if (state?.redis) return;
  const redis = new Redis(env.redisUrl);
  try {
    // Prefixes of their own that specs derive from the suite's (`<prefix>-hung-…`) included.
    const patterns = [`${env.keyPrefix}:*`, `{${env.keyPrefix}}:*`, `${env.keyPrefix}-*`];
    for (const pattern of [...patterns, `{${env.keyPrefix}-*`]) {
      await unlinkEach(redis, await keysMatching(redis, pattern));
    }
  } finally {
    redis.disconnect();
  }
}
