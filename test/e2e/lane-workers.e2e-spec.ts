import { getPriority } from 'node:os';
import { closeDb, db, eventually, execute, login } from './support/client';
import {
  PARQUET,
  deployment,
  firstAnswer,
  niceOf,
  niceOfThreads,
  queries,
  queryOf,
  startWorker,
} from './support/lanes';

/**
 * Cluster mode only (standalone mode's pools serve both lanes, in the api): a worker takes
 * jobs only of the lanes it serves, and a lane no live worker serves is refused at once.
 */
const stops: (() => Promise<unknown>)[] = [];

afterAll(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
  await closeDb();
});

jest.setTimeout(90_000);

describe('a worker serving only the export lane', () => {
  it('answers 503 at once for an interactive query while no worker serves its lane', async () => {
    const { api, prefix } = await deployment({}, stops);
    const exporter = startWorker(prefix, { SLUICE_WORKER_LANES: 'export' });
    stops.push(() => exporter.stop());
    const token = await login();
    const baseUrl = api.baseUrl;
    // The api admits Parquet once the export worker beats.
    const first = await firstAnswer(baseUrl, token, PARQUET);
    expect(first.headers.get('content-type')).toBe('application/parquet');
    const started = Date.now();
    const json = await execute({ statement: 'select 1 as one' }, { token, baseUrl });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(json.status).toBe(503);
    expect(json.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(json.json.status.reason).toMatch(/interactive lane/);
    // It gives way to interactive work on this machine: its main thread and the pool's threads
    // (two by default), made after it lowered its priority, run at nice 10.
    expect(exporter.output()).toContain('serving only the export lane, at nice 10');
    const pid = exporter.child.pid!;
    expect(niceOf(pid, pid)).toBe(10);
    expect(niceOfThreads(pid).filter((n) => n === 10).length).toBeGreaterThanOrEqual(3);
  });

  it('never takes an interactive job, even idle while one waits for the busy worker of its lane', async () => {
    const { api, prefix } = await deployment({}, stops);
    const exporter = startWorker(prefix, { SLUICE_WORKER_LANES: 'export' });
    // One slot of the interactive lane, in a worker of its own.
    const interactive = startWorker(prefix, {
      SLUICE_WORKER_LANES: 'interactive',
      SLUICE_WORKER_THREADS: '1',
      SLUICE_TASKS_PER_THREAD: '1',
    });
    stops.push(
      () => exporter.stop(),
      () => interactive.stop(),
    );
    const token = await login();
    const baseUrl = api.baseUrl;
    await firstAnswer(baseUrl, token);
    // The export worker serves too (its heartbeat seen: started at nice 10, it may come last).
    await eventually(async () => {
      const res = await execute(
        { statement: 'select 1 as one' },
        { token, baseUrl, headers: PARQUET },
      );
      return res.status === 200 ? res : undefined;
    }, 30_000);
    // The interactive worker's one slot is taken, until the test lets go of a lock: not for a
    // time, which the exports below may outlast on a busy machine.
    const key = Math.floor(Math.random() * 2 ** 31);
    const holder = await db().connect();
    await holder.query('select pg_advisory_lock($1)', [key]);
    let held = true;
    const letGo = async () => {
      if (!held) return;
      held = false;
      await holder.query('select pg_advisory_unlock($1)', [key]);
      holder.release();
    };
    stops.push(letGo);
    const busy = execute(
      { statement: `select pg_advisory_xact_lock_shared(${key}), 1 as one` },
      { token, baseUrl },
    );
    await eventually(async () => {
      const running = (await queries(token, baseUrl)).find(
        (q) => q.lane === 'interactive' && q.state === 'running',
      );
      return running;
    });
    // ...so the next interactive query waits, while the export worker is free.
    const pending = execute({ statement: 'select 42 as answer' }, { token, baseUrl });
    const waiting = await eventually(async () =>
      (await queries(token, baseUrl)).find((q) => q.lane === 'interactive' && q.state === 'queued'),
    );
    for (let i = 0; i < 3; i += 1) {
      const res = await execute(
        { statement: 'select 1 as one' },
        { token, baseUrl, headers: PARQUET },
      );
      expect(res.status).toBe(200);
    }
    expect(await queryOf(waiting.query_id, token, baseUrl)).toMatchObject({
      state: 'queued',
      lane: 'interactive',
      queue_position: 0,
      started_at: null,
    });
    expect(exporter.output()).toContain('consuming the export lane (execute-export)');
    expect(exporter.output()).not.toContain('interactive lane');
    // A worker of the interactive lane keeps the priority it was started with (this test's).
    const mine = getPriority();
    expect(niceOfThreads(interactive.child.pid!).every((n) => n === mine)).toBe(true);
    // Its own worker takes it once the slot is free.
    await letGo();
    expect((await busy).status).toBe(200);
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([[42]]);
    expect(res.json.query_id).toBe(waiting.query_id);
  });
});
