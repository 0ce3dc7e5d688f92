import { loadConfig } from '@app/config';
import { ExecuteJobData } from '@app/contracts';
import { testDatabaseUrl } from '@test/settings';
import { captureLogs } from '@test/support/captured-logs';
import { proxyToTestDatabase } from '@test/support/tcp.proxy';
import { SessionLoginResolver } from './session-login.resolver';

/** A database user's job, whose session is read from a metadata database that never answers. */
describe(SessionLoginResolver.name, () => {
  const logs = captureLogs();

  it('refuses the job with 503 within SLUICE_PG_CONNECT_TIMEOUT_MS, not when its time limit ends', async () => {
    const proxy = await proxyToTestDatabase();
    proxy.answerNothing();
    const resolver = new SessionLoginResolver(
      loadConfig({
        DATABASE_URL: testDatabaseUrl,
        SLUICE_METADATA_DATABASE_URL: proxy.urlFor(testDatabaseUrl),
        SLUICE_PG_CONNECT_TIMEOUT_MS: '300',
      }),
    );
    const job = { queryId: 'spec', username: 'ann', session: 'sid' } as ExecuteJobData;
    try {
      const started = Date.now();
      const resolved = await resolver.resolve(job);
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(resolved.refused).toMatchObject({ sql_state: '08006' });
      expect(logs.lines).toEqual([
        {
          level: 'error',
          context: 'SessionLoginResolver',
          message: 'query spec: cannot read its session: timeout expired',
        },
      ]);
    } finally {
      // The proxy first: a connect still hung (no limit) ends with it, and so can the pool.
      await proxy.stop();
      await resolver.onApplicationShutdown();
    }
  }, 10_000);
});
