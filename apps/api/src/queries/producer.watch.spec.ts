import { LoggerService } from '@nestjs/common';
import { ExecuteJobData, SluiceError, statusOf } from '@app/contracts';
import { InProcessJobQueue, JobState } from '@app/transport';
import { ProducerWatch, WORKER_LOST_REASON } from './producer.watch';

/**
 * What a quiet result stream is told, job state by job state, over the in-process queue of
 * standalone mode; admission is reduced to whether a worker is alive.
 */
const noWorker = new SluiceError('UNAVAILABLE', 'no worker is available to run the query');
const job = (queryId: string, startBy = Date.now() + 60_000) =>
  ({ queryId, startBy, enqueuedAt: Date.now(), lane: 'interactive' }) as ExecuteJobData;

let queue: InProcessJobQueue;
let alive: boolean;
let warnings: string[];
let watch: ProducerWatch;
const workers = { serving: () => Promise.resolve(alive), noWorker: () => noWorker };
const logger = { warn: (message: string) => warnings.push(message) } as LoggerService;

beforeEach(() => {
  queue = new InProcessJobQueue({ seconds: 60, count: 1000 });
  alive = true;
  warnings = [];
  watch = new ProducerWatch(queue, workers, logger);
});

afterEach(() => queue.close());

describe(ProducerWatch.name, () => {
  it('lets a queued job wait while a worker is alive and its latest start is ahead', async () => {
    await queue.enqueue(job('q'));
    expect(await watch.of(job('q'))()).toBeUndefined();
    expect(await queue.state('q')).toBe('queued');
  });

  it('unqueues a job past its latest start and ends it with TIME_LIMIT', async () => {
    const late = job('late', Date.now() - 1);
    await queue.enqueue(late);
    expect(await watch.of(late)()).toEqual({
      kind: 'error',
      status: statusOf('TIME_LIMIT', 'query waited too long in the queue'),
    });
    expect(await queue.state('late')).toBe('unknown');
  });

  it('unqueues a job no worker is left to take and ends it as admission would refuse it', async () => {
    await queue.enqueue(job('orphan'));
    alive = false;
    expect(await watch.of(job('orphan'))()).toEqual({ kind: 'error', status: noWorker.toStatus() });
    expect(await queue.state('orphan')).toBe('unknown');
  });

  it('lets a running job be quiet however long', async () => {
    queue.consume(() => new Promise<void>(() => undefined), { interactive: 1, export: 1 }, 100);
    await queue.enqueue(job('busy', Date.now() - 1));
    alive = false;
    expect(await queue.state('busy')).toBe('active');
    expect(await watch.of(job('busy'))()).toBeUndefined();
  });

  it('gives an ended job one more quiet spell for its last record, then ends it as lost', async () => {
    queue.consume(() => Promise.resolve(), { interactive: 1, export: 1 }, 100);
    await queue.enqueue(job('done'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(await queue.state('done')).toBe('completed');
    const check = watch.of(job('done'));
    expect(await check()).toBeUndefined();
    expect(await check()).toEqual({
      kind: 'error',
      status: statusOf('WORKER_LOST', WORKER_LOST_REASON),
    });
    expect(warnings).toEqual([
      'query done: job is completed but its stream ended without a status',
    ]);
  });

  it('ends a job whose worker is gone at once, as lost and not retried', async () => {
    const losing = Object.assign(new InProcessJobQueue({ seconds: 60, count: 1000 }), {
      state: (): Promise<JobState> => Promise.resolve('lost'),
    });
    const record = await new ProducerWatch(losing, workers, logger).of(job('gone'))();
    expect(record).toEqual({
      kind: 'error',
      status: statusOf(
        'WORKER_LOST',
        'the worker running the query stopped; the query was not retried',
      ),
    });
    expect(warnings).toEqual(['query gone: the worker that took it is gone']);
  });
});
