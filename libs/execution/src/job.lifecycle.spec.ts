import { Logger } from '@nestjs/common';
import { ExecuteJobData, ResultRecord, okStatus, statusOf } from '@app/contracts';
import { InProcessQueryRegistry, InProcessResultChannel } from '@app/transport';
import { JobLifecycle } from './job.lifecycle';

/** A registry whose writes at a query's end fail the first `failures` times (a Redis blip). */
class FlakyRegistry extends InProcessQueryRegistry {
  constructor(private failures: number) {
    super(60);
  }

  override finish(...args: Parameters<InProcessQueryRegistry['finish']>): Promise<void> {
    if (this.failures-- > 0) return Promise.reject(new Error('connection lost'));
    return super.finish(...args);
  }

  override release(owner: string, queryId: string): Promise<void> {
    if (this.failures-- > 0) return Promise.reject(new Error('connection lost'));
    return super.release(owner, queryId);
  }
}

const job = { queryId: 'q1', username: 'ann' } as ExecuteJobData;
const outcome = { status: okStatus('OK'), rows: 1, bytes: 10 };

async function started(registry: InProcessQueryRegistry): Promise<void> {
  await registry.create({
    queryId: 'q1',
    owner: 'ann',
    state: 'queued',
    format: 'json',
    statement: 'select 1',
    createdAt: Date.now(),
    rows: 0,
    bytes: 0,
  });
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

describe(JobLifecycle.name, () => {
  let channel: InProcessResultChannel;

  beforeEach(() => {
    channel = new InProcessResultChannel(1000);
  });

  afterEach(async () => {
    jest.restoreAllMocks();
    await channel.close();
  });

  it('ends the stream and records a time limit for a job that waited past its latest start', async () => {
    const registry = new InProcessQueryRegistry(60);
    await started(registry);
    const reader = channel.open('q1', { onSilence: () => Promise.reject(new Error('silent')) });
    const lifecycle = new JobLifecycle(registry, channel);
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

  it('records running, and writes nothing to the stream, for a job that may start', async () => {
    const registry = new InProcessQueryRegistry(60);
    await started(registry);
    const end = jest.spyOn(channel, 'end');
    expect(
      await new JobLifecycle(registry, channel).start({ ...job, startBy: Date.now() + 60_000 }),
    ).toBe(true);
    expect((await registry.get('q1'))?.state).toBe('running');
    expect(end).not.toHaveBeenCalled();
  });

  it('ends the stream with the refusal of a job whose session ended, and records it', async () => {
    const registry = new InProcessQueryRegistry(60);
    await started(registry);
    const status = statusOf('TOKEN_REVOKED', 'the session of this query ended');
    const lifecycle = new JobLifecycle(registry, channel);
    const reading = firstRecord(channel, 'q1');
    expect(await lifecycle.refused(job, status)).toEqual({ status, rows: 0, bytes: 0 });
    expect(await reading).toEqual({ kind: 'error', status });
    expect((await registry.get('q1'))?.status).toEqual(status);
  });

  it('ends the stream with an internal error when the task died, and records it', async () => {
    const registry = new InProcessQueryRegistry(60);
    await started(registry);
    const reading = firstRecord(channel, 'q1');
    await new JobLifecycle(registry, channel).crashed(job);
    expect(await reading).toEqual({ kind: 'error', status: statusOf('INTERNAL') });
    expect((await registry.get('q1'))?.state).toBe('failed');
  });

  it('records a crash even when the sink cannot be written to', async () => {
    const registry = new InProcessQueryRegistry(60);
    await started(registry);
    jest.spyOn(channel, 'end').mockRejectedValue(new Error('channel down'));
    await expect(new JobLifecycle(registry, channel).crashed(job)).resolves.toBeUndefined();
    expect((await registry.get('q1'))?.state).toBe('failed');
  });

  it("records the end and frees the owner's slot through a registry that fails twice", async () => {
    const registry = new FlakyRegistry(2);
    await started(registry);
    await new JobLifecycle(registry, channel).finish(job, outcome);
    expect((await registry.get('q1'))?.state).toBe('succeeded');
    expect(await registry.admit('ann', 'q2', 1)).toBe(0);
  });

  it('logs the query id when the registry stays out of reach, and does not throw', async () => {
    const error = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const registry = new FlakyRegistry(Number.POSITIVE_INFINITY);
    await started(registry);
    await expect(new JobLifecycle(registry, channel).finish(job, outcome)).resolves.toBeUndefined();
    expect(error).toHaveBeenCalledWith(expect.stringContaining('query q1: cannot record'));
    expect(error).toHaveBeenCalledWith(
      expect.stringContaining("query q1: cannot free its owner's slot"),
    );
    expect(await registry.admit('ann', 'q2', 1)).toBeUndefined();
  });
});
