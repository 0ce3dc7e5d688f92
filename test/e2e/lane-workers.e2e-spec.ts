import { eventually, execute, login } from './support/client';
import { PARQUET, deployment, queries, queryOf, startWorker } from './support/lanes';

/**
 * Cluster mode only (standalone mode has one in-process pool serving both lanes): a worker takes
 * jobs only of the lanes it serves.
 */
const stops: (() => Promise<unknown>)[] = [];

afterAll(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

jest.setTimeout(90_000);

describe('a worker serving only the export lane', () => {
  it('takes export jobs and never an interactive one, which waits for a worker of its lane', async () => {
    const { api, prefix } = await deployment({}, stops);
    const exporter = startWorker(prefix, { SLUICE_WORKER_LANES: 'export' });
    stops.push(() => exporter.stop());
    const token = await login();
    const baseUrl = api.baseUrl;
    // The api admits queries once a worker beats (any lane).
    const first = await eventually(async () => {
      const res = await execute(
        { statement: 'select 1 as one' },
        { token, baseUrl, headers: PARQUET },
      );
      return res.status === 200 ? res : undefined;
    }, 30_000);
    expect(first.headers.get('content-type')).toBe('application/parquet');

    const pending = execute({ statement: 'select 42 as answer' }, { token, baseUrl });
    const interactive = await eventually(async () => {
      const [q] = (await queries(token, baseUrl)).filter((q) => q.lane === 'interactive');
      return q;
    });
    // Export work submitted after it runs on the same worker meanwhile: the worker is alive and
    // taking jobs, just not from the interactive lane.
    for (let i = 0; i < 3; i += 1) {
      const res = await execute(
        { statement: 'select 1 as one' },
        { token, baseUrl, headers: PARQUET },
      );
      expect(res.status).toBe(200);
    }
    const waiting = await queryOf(interactive.query_id, token, baseUrl);
    expect(waiting).toMatchObject({ state: 'queued', lane: 'interactive', queue_position: 0 });
    expect(waiting.started_at).toBeNull();
    expect(exporter.output()).toContain('consuming the export lane (execute-export)');
    expect(exporter.output()).not.toContain('interactive lane');

    // A worker of its lane takes it at once.
    const worker = startWorker(prefix, { SLUICE_WORKER_LANES: 'interactive' });
    stops.push(() => worker.stop());
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([[42]]);
    expect(res.json.query_id).toBe(interactive.query_id);
  });
});
