import { ExecuteJobData, Lane } from '@app/contracts';
import { InProcessJobQueue } from './in-process-job.queue';

/** The queue of standalone mode: dispatch order, concurrency and the states it reports. */
const job = (queryId: string, priority?: number, lane: Lane = 'interactive') =>
  ({ queryId, priority, lane, enqueuedAt: 0 }) as ExecuteJobData;

/** A handler whose jobs run until the test finishes them. */
function controlledHandler() {
  const started: string[] = [];
  const finishers = new Map<string, (failed?: boolean) => void>();
  const handler = (data: ExecuteJobData) =>
    new Promise<void>((resolve, reject) => {
      started.push(data.queryId);
      finishers.set(data.queryId, (failed) => (failed ? reject(new Error('x')) : resolve()));
    });
  const finish = async (queryId: string, failed = false) => {
    finishers.get(queryId)!(failed);
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { handler, started, finish };
}

let queue: InProcessJobQueue;

beforeEach(() => {
  queue = new InProcessJobQueue({ seconds: 60, count: 1000 });
});

afterEach(async () => {
  await queue.close();
});

describe(InProcessJobQueue.name, () => {
  it('runs jobs by priority, first come first served within one, at most `concurrency` at once', async () => {
    const { handler, started, finish } = controlledHandler();
    await queue.enqueue(job('a', 2));
    await queue.enqueue(job('b', 1));
    await queue.enqueue(job('c', 2));
    await queue.enqueue(job('d', 1));
    await queue.enqueue(job('e'));
    expect([
      await queue.position('b'),
      await queue.position('d'),
      await queue.position('e'),
    ]).toEqual([0, 1, 2]);
    queue.consume(handler, { interactive: 2, export: 2 }, 100);
    expect(started).toEqual(['b', 'd']);
    expect(await queue.waitingCount()).toBe(3);
    expect(await queue.position('e')).toBe(0);
    expect(await queue.position('b')).toBeUndefined();
    await finish('d');
    expect(started).toEqual(['b', 'd', 'e']);
    await finish('b');
    await finish('e');
    expect(started).toEqual(['b', 'd', 'e', 'a', 'c']);
  });

  it('reports each job queued, active, then completed or failed', async () => {
    const { handler, finish } = controlledHandler();
    await queue.enqueue(job('ok'));
    await queue.enqueue(job('bad'));
    await queue.enqueue(job('later'));
    expect(await queue.state('ok')).toBe('queued');
    queue.consume(handler, { interactive: 2, export: 2 }, 100);
    expect(await queue.state('ok')).toBe('active');
    expect(await queue.state('later')).toBe('queued');
    await finish('ok');
    await finish('bad', true);
    expect(await queue.state('ok')).toBe('completed');
    expect(await queue.state('bad')).toBe('failed');
    expect(await queue.state('nobody')).toBe('unknown');
  });

  it('removes a job still queued, and not one that runs', async () => {
    const { handler, started } = controlledHandler();
    await queue.enqueue(job('a'));
    await queue.enqueue(job('b'));
    queue.consume(handler, { interactive: 1, export: 1 }, 100);
    expect(await queue.removeQueued('a')).toBe(false);
    expect(await queue.removeQueued('b')).toBe(true);
    expect(await queue.state('b')).toBe('unknown');
    expect(await queue.waitingCount()).toBe(0);
    expect(started).toEqual(['a']);
  });

  it("runs at most each lane's slots, and lets one lane's jobs pass the other's waiting ones", async () => {
    const { handler, started, finish } = controlledHandler();
    for (const id of ['e1', 'e2', 'e3']) await queue.enqueue(job(id, 1, 'export'));
    await queue.enqueue(job('i1', 1));
    queue.consume(handler, { interactive: 1, export: 2 }, 100);
    // Two export slots: the third export job waits, the interactive one behind it runs.
    expect(started).toEqual(['e1', 'e2', 'i1']);
    expect(await queue.counts()).toEqual({
      interactive: { waiting: 0, active: 1 },
      export: { waiting: 1, active: 2 },
    });
    await queue.enqueue(job('i2', 1));
    expect(await queue.position('i2')).toBe(0);
    expect(await queue.position('e3')).toBe(0);
    await finish('i1');
    // The interactive slot is free again: the interactive job takes it, not the export one.
    expect(started).toEqual(['e1', 'e2', 'i1', 'i2']);
    await finish('e1');
    expect(started).toEqual(['e1', 'e2', 'i1', 'i2', 'e3']);
  });

  it('keeps at most `count` finished jobs of each lane and outcome, the newest', async () => {
    const kept = new InProcessJobQueue({ seconds: 60, count: 2 });
    const { handler, finish } = controlledHandler();
    kept.consume(handler, { interactive: 5, export: 5 }, 100);
    for (const id of ['a', 'b', 'c', 'f']) await kept.enqueue(job(id));
    await kept.enqueue(job('x', undefined, 'export'));
    for (const id of ['a', 'b', 'c', 'x']) await finish(id);
    await finish('f', true);
    const states = await Promise.all(['a', 'b', 'c', 'f', 'x'].map((id) => kept.state(id)));
    expect(states).toEqual(['unknown', 'completed', 'completed', 'failed', 'completed']);
    await kept.close();
  });

  it('forgets a finished job at once with a count of 0, and past its age otherwise', async () => {
    const none = new InProcessJobQueue({ seconds: 60, count: 0 });
    const aged = new InProcessJobQueue({ seconds: 0, count: 1000 });
    for (const q of [none, aged]) {
      const { handler, finish } = controlledHandler();
      q.consume(handler, { interactive: 5, export: 5 }, 100);
      await q.enqueue(job('a'));
      await q.enqueue(job('b'));
      await finish('a');
      await new Promise((resolve) => setTimeout(resolve, 2));
      await finish('b');
      expect(await q.state('a')).toBe('unknown');
      await q.close();
    }
    expect(await none.state('b')).toBe('unknown');
    expect(await aged.state('b')).toBe('completed');
  });

  it('takes no job once closed', async () => {
    await queue.close();
    await expect(queue.enqueue(job('a'))).rejects.toThrow('queue is closed');
  });
});
