import { Pool } from 'pg';
import { testDatabaseUrl } from '@test/settings';
import { endSessionsBehind, proxiedEachCase } from '@test/support/tcp.proxy';
import {
  connectingWithin,
  isConnectTimeout,
  isSessionEnded,
  queryOnLiveSession,
} from './pg.session';

/**
 * A pool's idle connection whose backend was terminated, PostgreSQL's notice of it held back by a
 * proxy until the next query is sent: the pool hands out the dead connection, as it does whenever
 * the notice comes a moment late. Real PostgreSQL.
 */
const spec = proxiedEachCase(
  (url) => {
    const pool = new Pool({ connectionString: url, max: 1 });
    // The dead connection's own error, after the query's, must not fail the test.
    pool.on('error', () => undefined);
    return pool;
  },
  (pool) => pool.end(),
);

describe(queryOnLiveSession.name, () => {
  it('asks again on a new connection, where pool.query fails with the ended session', async () => {
    await spec.made.query('SELECT 1');
    await endSessionsBehind(spec.proxy, spec.control);
    const failure: unknown = await spec.made.query('SELECT 1').catch((err: unknown) => err);
    expect(isSessionEnded(failure)).toBe(true);

    await spec.made.query('SELECT 1');
    const [ended] = await endSessionsBehind(spec.proxy, spec.control);
    const { rows } = await queryOnLiveSession<{ pid: number }>(
      spec.made,
      'SELECT pg_backend_pid() AS pid',
    );
    expect(spec.proxy.heldReplies).toBe(2);
    expect(rows[0].pid).not.toBe(ended);
  });

  it('passes any other failure on, asked once', async () => {
    const queries = jest.spyOn(spec.made, 'query');
    await expect(
      queryOnLiveSession(spec.made, 'SELECT * FROM no_such_table_x'),
    ).rejects.toMatchObject({
      code: '42P01',
    });
    expect(queries).toHaveBeenCalledTimes(1);
  });
});

describe(connectingWithin.name, () => {
  it('gives up on a PostgreSQL that takes the connection and never answers', async () => {
    spec.proxy.answerNothing();
    const timed = new Pool({
      connectionString: spec.proxy.urlFor(testDatabaseUrl),
      Client: connectingWithin(300),
    });
    const started = Date.now();
    const failure: unknown = await timed.connect().catch((err: unknown) => err);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(isConnectTimeout(failure)).toBe(true);
    await timed.end();
  }, 5_000);

  it('does not cut a wait for the connection of a busy pool', async () => {
    const timed = new Pool({
      connectionString: testDatabaseUrl,
      max: 1,
      Client: connectingWithin(200),
    });
    const busy = await timed.connect();
    const waiting = timed.connect();
    await new Promise((resolve) => setTimeout(resolve, 600));
    busy.release();
    const next = await waiting;
    expect((await next.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    next.release();
    await timed.end();
  });

  it("never takes PostgreSQL's own error for a connect's timeout, whatever its message", async () => {
    for (const message of ['timeout expired', 'Connection terminated due to connection timeout']) {
      // What a hostile user would raise to pass a failure off as an outage.
      const raised: unknown = await spec.control
        .query(`DO $$ BEGIN RAISE EXCEPTION '${message}'; END $$`)
        .catch((err: unknown) => err);
      expect((raised as Error).message).toBe(message);
      expect(isConnectTimeout(raised)).toBe(false);
    }
  });

  it('connects as pg does when PostgreSQL answers', async () => {
    const timed = new Pool({ connectionString: testDatabaseUrl, Client: connectingWithin(5_000) });
    expect((await timed.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    await timed.end();
  });
});
