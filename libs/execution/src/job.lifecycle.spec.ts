import { Logger } from '@nestjs/common';
import { ExecuteJobData, ResultRecord, okStatus, statusOf } from '@app/contracts';
import { InProcessQueryRegistry, InProcessResultChannel, QueryRegistry } from '@app/transport';
import { JobLifecycle } from './job.lifecycle';
import { QueryLifecycle } from './query.lifecycle';
import { queuedRecord } from '@test/support/query-record';

const job = { queryId: 'q1', username: 'ann' } as ExecuteJobData;

async function started(registry: InProcessQueryRegistry): Promise<void> {
  await registry.create(queuedRecord('q1'));
  expect(await registry.admit('ann', 'q1', 1)).toBe(0);
}

/** The first record a reader of the query finds in the channel the lifecycle ended. */
async function firstRecord(
  channel: InProcessResultChannel,
  queryId: string,
): Promise<ResultRecord> {
  const reader = channel.open(queryId, { onSilence: () => Promise.reject(new Error('silent')) });
  try {
    return await reader.next();
  } finally {
    await reader.close();
  }
}

/** Runs the lifecycle's timers `ms` ahead on jest's clock, and the promises they start. */
const elapse = (ms: number) => jest.advanceTimersByTimeAsync(ms);

describe(JobLifecycle.name, () => {
  let channel: InProcessResultChannel;

  beforeEach(() => {
    channel = new InProcessResultChannel(1000);
  });

  afterEach(async () => {
    jest.useRealTimers();
    jest.restoreAllMocks();
    await channel.close();
  });

  it('ends the stream and records a time limit for a job that waited past its latest start', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    await started(registry);
    const reader = channel.open('q1', { onSilence: () => Promise.reject(new Error('silent')) });
    const lifecycle = new JobLifecycle(new QueryLifecycle(registry), channel);
    expect(await lifecycle.start({ ...job, startBy: Date.now() - 1 })).toBe(false);
    const record = await reader.next();
    await reader.close();
    expect(record).toEqual({
      kind: 'error',
      status: expect.objectContaining({ vendor_code: -1122 }),
    });
    expect((await registry.get('q1'))?.state).toBe('failed');
    expect(await registry.admit('ann', 'q2', 1)).toBe(0);
  });

  it('ends a job taken before, and cancelled since, as cancelled: it never runs', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    await started(registry);
    const reader = channel.open('q1', { onSilence: () => Promise.reject(new Error('silent')) });
    await channel.cancel('q1');
    const lifecycle = new JobLifecycle(new QueryLifecycle(registry), channel);
    expect(await lifecycle.start(job, { takenBefore: true })).toBe(false);
    expect(await reader.next()).toEqual({
      kind: 'error',
      status: expect.objectContaining({ vendor_code: -900 }),
    });
    await reader.close();
    expect((await registry.get('q1'))?.state).toBe('cancelled');
  });

  it('asks about a cancel only for a job taken before (one round trip saved on every other)', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    await started(registry);
    const asked = jest.spyOn(channel, 'cancelAsked');
    const lifecycle = new JobLifecycle(new QueryLifecycle(registry), channel);
    expect(await lifecycle.start(job)).toBe(true);
    expect(asked).not.toHaveBeenCalled();
    lifecycle.close();
  });

  it('records running once a job has run a while, and writes nothing to the stream', async () => {
    jest.useFakeTimers();
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    await started(registry);
    const end = jest.spyOn(channel, 'end');
    const before = Date.now();
    expect(
      await new JobLifecycle(new QueryLifecycle(registry), channel, 20).start({
        ...job,
        startBy: Date.now() + 60_000,
      }),
    ).toBe(true);
    expect((await registry.get('q1'))?.state).toBe('queued');
    await elapse(19);
    expect((await registry.get('q1'))?.state).toBe('queued');
    await elapse(1);
    const record = await registry.get('q1');
    expect(record?.state).toBe('running');
    expect(record?.startedAt).toBeGreaterThanOrEqual(before);
    expect(end).not.toHaveBeenCalled();
  });

  it('records a job that ends quickly in one write, from queued to its end, with its start', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    await started(registry);
    jest.useFakeTimers();
    const transition = jest.spyOn(registry, 'transition');
    const move = jest.spyOn(registry, 'move');
    const lifecycle = new JobLifecycle(new QueryLifecycle(registry), channel, 50);
    const before = Date.now();
    expect(await lifecycle.start(job)).toBe(true);
    await lifecycle.finish(job, { status: okStatus(), rows: 3, bytes: 40, streamingAt: before });
    await elapse(100);
    // A worker listens for no ends: its one write is not read back.
    expect(move).toHaveBeenCalledTimes(1);
    expect(transition).not.toHaveBeenCalled();
    const record = await registry.get('q1');
    expect(record).toMatchObject({ state: 'succeeded', rows: 3, bytes: 40, streamingAt: before });
    expect(record?.startedAt).toBeGreaterThanOrEqual(before);
    expect(record?.finishedAt).toBeGreaterThanOrEqual(record?.startedAt ?? Infinity);
  });

  it('logs the cause of an internal error with the query id, whoever records the end', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    await started(registry);
    const error = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const lifecycle = new JobLifecycle(new QueryLifecycle(registry), channel, 50);
    expect(await lifecycle.start(job)).toBe(true);
    const status = statusOf('INTERNAL');
    await lifecycle.finish(job, {
      status,
      rows: 0,
      bytes: 0,
      recorded: true,
      cause: 'Error: boom',
    });
    expect(error).toHaveBeenCalledWith('query q1: internal error: Error: boom');
  });

  it('logs as a warning, not an internal error, what Redis said of a result stream lost', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    await started(registry);
    const error = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const lifecycle = new JobLifecycle(new QueryLifecycle(registry), channel, 50);
    expect(await lifecycle.start(job)).toBe(true);
    await lifecycle.finish(job, {
      status: statusOf('UNAVAILABLE', 'the result stream was lost'),
      rows: 0,
      bytes: 0,
      recorded: true,
      cause: 'result stream write failed: OOM command not allowed',
    });
    expect(warn).toHaveBeenCalledWith(
      'query q1: result stream write failed: OOM command not allowed',
    );
    expect(error).not.toHaveBeenCalled();
  });

  it('writes nothing for a job whose thread recorded its end with the last entry, nor later', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    await started(registry);
    jest.useFakeTimers();
    const transition = jest.spyOn(registry, 'transition');
    const move = jest.spyOn(registry, 'move');
    const release = jest.spyOn(registry, 'release');
    const lifecycle = new JobLifecycle(new QueryLifecycle(registry), channel, 20);
    expect(await lifecycle.start(job)).toBe(true);
    await lifecycle.finish(job, { status: okStatus(), rows: 3, bytes: 40, recorded: true });
    // Not even the pending `running` (its timer is stopped); the api that reads the end frees the slot.
    await elapse(60);
    expect(transition).not.toHaveBeenCalled();
    expect(move).not.toHaveBeenCalled();
    expect(release).not.toHaveBeenCalled();
    expect((await registry.get('q1'))?.state).toBe('queued');
  });

  it('ends the stream with the refusal of a job whose session ended, and records it', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    await started(registry);
    const status = statusOf('TOKEN_REVOKED', 'the session of this query ended');
    const lifecycle = new JobLifecycle(new QueryLifecycle(registry), channel);
    const reading = firstRecord(channel, 'q1');
    expect(await lifecycle.refused(job, status)).toEqual({ status, rows: 0, bytes: 0 });
    expect(await reading).toEqual({ kind: 'error', status });
    expect((await registry.get('q1'))?.status).toEqual(status);
  });

  it('ends the stream with an internal error when the task died, and records it', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    await started(registry);
    const reading = firstRecord(channel, 'q1');
    await new JobLifecycle(new QueryLifecycle(registry), channel).crashed(job);
    expect(await reading).toEqual({ kind: 'error', status: statusOf('INTERNAL') });
    expect((await registry.get('q1'))?.state).toBe('failed');
  });

  it.each([
    [
      Object.assign(
        new Error('Worker terminated due to reaching memory limit: JS heap out of memory'),
        {
          code: 'ERR_WORKER_OUT_OF_MEMORY',
        },
      ),
      'the worker thread running the query ran out of memory',
    ],
    [new Error('worker exited with code: 1'), 'the worker thread running the query stopped'],
  ])('ends the stream with WORKER_LOST when the thread died under it: %s', async (err, reason) => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    await started(registry);
    const reading = firstRecord(channel, 'q1');
    await new JobLifecycle(new QueryLifecycle(registry), channel).crashed(job, err);
    const status = statusOf('WORKER_LOST', reason);
    expect(await reading).toEqual({ kind: 'error', status });
    expect(await registry.get('q1')).toMatchObject({ state: 'failed', status });
  });

  it('records a crash even when the sink cannot be written to', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    await started(registry);
    jest.spyOn(channel, 'end').mockRejectedValue(new Error('channel down'));
    await expect(
      new JobLifecycle(new QueryLifecycle(registry), channel).crashed(job),
    ).resolves.toBeUndefined();
    expect((await registry.get('q1'))?.state).toBe('failed');
  });

  it("renews its owner's slot while the job runs, and stops once it ended", async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    await started(registry);
    jest.useFakeTimers();
    const renewed: string[] = [];
    // In-process slots need no renewal (renew does nothing): count the calls the worker makes.
    const port: QueryRegistry = registry;
    port.renew = (_owner, queryId) => {
      renewed.push(queryId);
      return Promise.resolve();
    };
    const lifecycle = new JobLifecycle(new QueryLifecycle(registry), channel, 10, 20);
    expect(await lifecycle.start(job)).toBe(true);
    await elapse(110);
    expect(renewed.length).toBeGreaterThanOrEqual(3);
    expect(new Set(renewed)).toEqual(new Set(['q1']));
    await lifecycle.finish(job, { status: statusOf('CANCELLED'), rows: 0, bytes: 0 });
    const after = renewed.length;
    await elapse(60);
    expect(renewed.length).toBe(after);
    lifecycle.close();
  });
});
