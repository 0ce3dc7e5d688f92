import { Pool } from 'pg';
import { loadConfig } from '@app/config';
import { testDatabaseUrl } from '@test/settings';
import { captureLogs } from '@test/support/captured-logs';
import { ReadinessService } from './readiness.service';
import { WorkerRosterService } from './worker-roster.service';

/** GET /health/ready answers anyone: what it says of a failed dependency. */
describe(ReadinessService.name, () => {
  const logs = captureLogs();

  it('names the failed check and its code, never what PostgreSQL said of its hosts, logins or databases', async () => {
    // A metadata database that is not there: PostgreSQL's message names it.
    const url = new URL(testDatabaseUrl);
    url.pathname = '/internal_meta_db_missing';
    const pool = new Pool({ connectionString: url.toString(), max: 1 });
    const config = loadConfig({ DATABASE_URL: testDatabaseUrl });
    // Only the database is looked at here: a worker is alive.
    const roster = { alive: () => Promise.resolve(['w1']), staleAfterMs: 15_000 };
    const readiness = new ReadinessService(
      config,
      undefined,
      pool,
      roster as unknown as WorkerRosterService,
    );
    try {
      const report = await readiness.ready();
      expect(report.checks.database).toMatchObject({
        ok: false,
        detail: 'metadata database did not answer (3D000)',
      });
      const answered = JSON.stringify(report);
      expect(answered).not.toContain('internal_meta_db_missing');
      expect(answered).not.toContain(url.hostname);
      expect(report.status.reason).toBe(
        'not ready: database: metadata database did not answer (3D000)',
      );
      // The operator's log has PostgreSQL's own words; the answer above does not.
      expect(logs.lines).toEqual([
        {
          level: 'warn',
          context: 'ReadinessService',
          message:
            'not ready: metadata database: database "internal_meta_db_missing" does not exist',
        },
      ]);
    } finally {
      await pool.end();
    }
  });
});
