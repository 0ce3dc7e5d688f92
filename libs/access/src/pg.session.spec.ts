import { Client, Pool } from 'pg';
import { connectTestDatabase, testDatabaseUrl } from '@test/settings';
import { HoldingRelay } from '@test/support/holding-relay';
import { isSessionEnded, queryOnLiveSession } from './pg.session';

/**
 * A pool's idle connection whose backend was terminated, PostgreSQL's notice of it held back by a
 * relay until the next query is sent: the pool hands out the dead connection, as it does whenever
 * the notice comes a moment late. Real PostgreSQL.
 */
let control: Client;
let relay: HoldingRelay;
let pool: Pool;

beforeAll(async () => {
  control = await connectTestDatabase();
});

afterAll(async () => {
  await control.end();
});

beforeEach(async () => {
  const url = new URL(testDatabaseUrl);
  relay = await HoldingRelay.start(url.hostname, Number(url.port || 5432));
  pool = new Pool({ connectionString: relay.urlFor(testDatabaseUrl), max: 1 });
  // The dead connection's own error, after the query's, must not fail the test.
  pool.on('error', () => undefined);
});

afterEach(async () => {
  await pool.end();
  await relay.close();
});

/** Ends the session of the pool's one (idle) connection, the notice held back. */
async function endPooledSession(): Promise<number> {
  const { rows } = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  relay.holdReplies();
  // Waits until the backend is gone.
  await control.query('SELECT pg_terminate_backend($1, 5000)', [rows[0].pid]);
  return rows[0].pid;
}

describe(queryOnLiveSession.name, () => {
  it('asks again on a new connection, where pool.query fails with the ended session', async () => {
    await endPooledSession();
    const failure: unknown = await pool.query('SELECT 1').catch((err: unknown) => err);
    expect(isSessionEnded(failure)).toBe(true);

    const ended = await endPooledSession();
    const { rows } = await queryOnLiveSession<{ pid: number }>(
      pool,
      'SELECT pg_backend_pid() AS pid',
    );
    expect(relay.heldReplies).toBe(2);
    expect(rows[0].pid).not.toBe(ended);
  });

  it('passes any other failure on, asked once', async () => {
    const queries = jest.spyOn(pool, 'query');
    await expect(queryOnLiveSession(pool, 'SELECT * FROM no_such_table_x')).rejects.toMatchObject({
      code: '42P01',
    });
    expect(queries).toHaveBeenCalledTimes(1);
  });
});
