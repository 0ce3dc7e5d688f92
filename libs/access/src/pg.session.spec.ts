import { Client, Pool } from 'pg';
import { connectTestDatabase, testDatabaseUrl } from '@test/settings';
import { TcpProxy, endSessionsBehind, proxyToTestDatabase } from '@test/support/tcp.proxy';
import { isSessionEnded, queryOnLiveSession } from './pg.session';

/**
 * A pool's idle connection whose backend was terminated, PostgreSQL's notice of it held back by a
 * proxy until the next query is sent: the pool hands out the dead connection, as it does whenever
 * the notice comes a moment late. Real PostgreSQL.
 */
let control: Client;
let proxy: TcpProxy;
let pool: Pool;

beforeAll(async () => {
  control = await connectTestDatabase();
});

afterAll(async () => {
  await control.end();
});

beforeEach(async () => {
  proxy = await proxyToTestDatabase();
  pool = new Pool({ connectionString: proxy.urlFor(testDatabaseUrl), max: 1 });
  // The dead connection's own error, after the query's, must not fail the test.
  pool.on('error', () => undefined);
});

afterEach(async () => {
  await pool.end();
  await proxy.stop();
});

describe(queryOnLiveSession.name, () => {
  it('asks again on a new connection, where pool.query fails with the ended session', async () => {
    await pool.query('SELECT 1');
    await endSessionsBehind(proxy, control);
    const failure: unknown = await pool.query('SELECT 1').catch((err: unknown) => err);
    expect(isSessionEnded(failure)).toBe(true);

    await pool.query('SELECT 1');
    const [ended] = await endSessionsBehind(proxy, control);
    const { rows } = await queryOnLiveSession<{ pid: number }>(
      pool,
      'SELECT pg_backend_pid() AS pid',
    );
    expect(proxy.heldReplies).toBe(2);
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
