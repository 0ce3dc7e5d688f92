import Redis from 'ioredis';
import { loadConfig } from '@app/config';
import { QueryPoolService } from '@app/execution';
import { testDatabaseUrl, testRedisUrl } from '@test/settings';
import { proxyToTestDatabase } from '@test/support/tcp.proxy';
import { HeartbeatService } from './heartbeat.service';
import { WorkerReadinessService } from './worker-readiness.service';

/** The worker's readiness, over a PostgreSQL that takes the connection and never answers. */
describe(WorkerReadinessService.name, () => {
  it('reports the database not ready within SLUICE_PG_CONNECT_TIMEOUT_MS, and frees its one connection', async () => {
    const redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
    const proxy = await proxyToTestDatabase();
    proxy.answerNothing();
    const config = loadConfig({
      DATABASE_URL: proxy.urlFor(testDatabaseUrl),
      REDIS_URL: testRedisUrl,
      SLUICE_PG_CONNECT_TIMEOUT_MS: '300',
    });
    // Only the database is looked at here: a fresh beat and a pool with threads.
    const heartbeat = { id: 'spec', lastBeatAt: Date.now() } as HeartbeatService;
    const pool = { stats: { threads: 1 } } as QueryPoolService;
    const readiness = new WorkerReadinessService(config, redis, heartbeat, pool);
    try {
      // Twice: a connect that hung would hold the pool's only connection, and the next probe
      // would wait behind it (the check's own 2 s limit would then be all it ever says).
      for (let probe = 0; probe < 2; probe++) {
        const report = await readiness.ready();
        expect(report.checks.database).toMatchObject({
          ok: false,
          detail: expect.stringMatching(/timeout expired/),
        });
      }
    } finally {
      // The proxy first: a connect still hung (no limit) ends with it, and so can the pool.
      await proxy.stop();
      await readiness.onModuleDestroy();
      await redis.quit();
    }
  }, 10_000);
});
