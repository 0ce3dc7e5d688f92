import { getPriority } from 'node:os';
import { closeDb, e2eEnv, eventually, execute, holdLock, login, request } from './support/client';
import {
  PARQUET,
  deployment,
  firstAnswer,
  niceOf,
  niceOfThreads,
  queries,
  queryOf,
  sample,
  startWorker,
} from './support/lanes';

/**
 * Lanes: Parquet and Arrow answers (or a request naming "lane": "export") wait in the export lane,
 * everything else in the interactive one; a worker takes jobs only of the lanes it serves, and
 * serving both, runs export jobs on threads of their own, at a lower priority.
 */
const cluster = e2eEnv().mode === 'cluster';

const stops: (() => Promise<unknown>)[] = [];

afterAll(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
  await closeDb();
});

jest.setTimeout(90_000);

describe('lanes', () => {
  it('queues a JSON request in the interactive lane, a Parquet one (or one naming export) in the export lane', async () => {
    const token = await login();
    const json = await execute({ statement: 'select 1 as one' }, { token });
    expect(json.status).toBe(200);
    const parquet = await execute({ statement: 'select 1 as one' }, { token, headers: PARQUET });
    expect(parquet.status).toBe(200);
    expect(parquet.headers.get('content-type')).toBe('application/parquet');
    const named = await execute({ statement: 'select 1 as one', lane: 'export' }, { token });
    expect(named.status).toBe(200);
    const lanes = await Promise.all(
      [
        json.json.query_id as string,
        parquet.headers.get('x-query-id')!,
        named.json.query_id as string,
      ].map(async (id) => (await queryOf(id, token)).lane),
    );
    expect(lanes).toEqual(['interactive', 'export', 'export']);
  });

  it('validates a lane the request names like any other field', async () => {
    const res = await execute({ statement: 'select 1', lane: 'bulk' });
    expect(res.status).toBe(400);
    expect(res.json.status.reason).toMatch(/lane/);
    const get = await request(undefined, {
      method: 'GET',
      path: `/v1/execute?statement=${encodeURIComponent('select 1 as one')}&lane=export`,
      token: await login(),
    });
    expect(get.status).toBe(200);
    expect((await queryOf(get.json.query_id as string, await login())).lane).toBe('export');
  });

  it('shows both lanes on the queue dashboard (cluster; standalone mode has none)', async () => {
    const res = await request(undefined, {
      method: 'GET',
      path: '/admin/queues/api/queues',
      token: await login(),
    });
    if (!cluster) {
      expect(res.status).toBe(404);
      expect(res.json.status.reason).toMatch(/standalone mode/);
      return;
    }
    expect(res.status).toBe(200);
    const listed = (res.json.queues as { name: string; displayName: string }[]).map((q) => [
      q.name,
      q.displayName,
    ]);
    expect(listed).toEqual(
      expect.arrayContaining([
        ['execute', 'interactive lane'],
        ['execute-export', 'export lane'],
      ]),
    );
  });
});

describe('a pool serving both lanes', () => {
  it('starts an interactive query at once while every export slot is busy', async () => {
    // Three interactive threads of one task each, and export threads of its own: three less the
    // reserve of one, two export slots; all of them for one user (the test's only one).
    const pool = {
      SLUICE_WORKER_THREADS: '3',
      SLUICE_TASKS_PER_THREAD: '1',
      SLUICE_WORKER_USER_SHARE_PERCENT: '100',
    };
    const { api, prefix } = await deployment(pool, stops);
    let poolPid = api.pid;
    if (cluster) {
      const worker = startWorker(prefix, pool);
      stops.push(() => worker.stop());
      poolPid = worker.child.pid!;
    }
    const token = await login();
    const baseUrl = api.baseUrl;
    await firstAnswer(baseUrl, token);

    // One export job more than there are export slots: the last one waits. Each runs until the
    // test lets go of a lock it holds, so none ends before the checks below, however slow the
    // machine, and none runs longer than they take.
    const lock = await holdLock();
    const exports = [1, 2, 3].map(() =>
      execute(
        { statement: `select 1 as one from ${lock.waitOn}` },
        { token, baseUrl, headers: PARQUET },
      ),
    );
    try {
      const busy = await eventually(async () => {
        const mine = (await queries(token, baseUrl)).filter((q) => q.lane === 'export');
        const running = mine.filter((q) => q.state === 'running');
        const queued = mine.filter((q) => q.state === 'queued');
        return running.length === 2 && queued.length === 1 ? { queued: queued[0] } : undefined;
      }, 15_000);
      expect(busy.queued.queue_position).toBe(0);
      const metrics = await (await fetch(`${baseUrl}/metrics`)).text();
      expect(sample(metrics, 'sluice_queue_jobs', { lane: 'export', state: 'waiting' })).toBe(1);
      expect(sample(metrics, 'sluice_queue_jobs', { lane: 'export', state: 'active' })).toBe(2);

      const started = Date.now();
      const res = await execute({ statement: 'select 7 as seven' }, { token, baseUrl });
      const took = Date.now() - started;
      expect(res.status).toBe(200);
      expect(res.json.data).toEqual([[7]]);
      // It never waited for one of them: they all still run.
      expect(took).toBeLessThan(2000);
      // And export did not get the reserve: its third job still waits.
      expect((await queryOf(busy.queued.query_id, token, baseUrl)).state).toBe('queued');
      // The export threads give way to interactive work on the same cores: they run at nice 10,
      // the process's other threads at the priority it was started with (this test's).
      const nice = niceOfThreads(poolPid);
      expect(nice.filter((n) => n === 10)).toHaveLength(2);
      expect(niceOf(poolPid, poolPid)).toBe(getPriority());
    } finally {
      await lock.release();
    }
    for (const done of await Promise.all(exports)) expect(done.status).toBe(200);
    // The wait in the queue is measured by lane: the third export job's shows there.
    await eventually(async () => {
      const text = await (await fetch(`${baseUrl}/metrics`)).text();
      const waited = (lane: string) =>
        sample(text, 'sluice_query_queue_wait_seconds_count', { lane }) ?? 0;
      return waited('export') >= 3 && waited('interactive') >= 2 ? true : undefined;
    });
  });
});
