import { Logger } from '@nestjs/common';
import { ExecuteJobData, okStatus } from '@app/contracts';
import { InProcessQueryRegistry } from '@app/transport';
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

describe(JobLifecycle.name, () => {
  afterEach(() => jest.restoreAllMocks());

  it("records the end and frees the owner's slot through a registry that fails twice", async () => {
    const registry = new FlakyRegistry(2);
    await started(registry);
    await new JobLifecycle(registry).finish(job, outcome);
    expect((await registry.get('q1'))?.state).toBe('succeeded');
    expect(await registry.admit('ann', 'q2', 1)).toBe(0);
  });

  it('logs the query id when the registry stays out of reach, and does not throw', async () => {
    const error = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const registry = new FlakyRegistry(Number.POSITIVE_INFINITY);
    await started(registry);
    await expect(new JobLifecycle(registry).finish(job, outcome)).resolves.toBeUndefined();
    expect(error).toHaveBeenCalledWith(expect.stringContaining('query q1: cannot record'));
    expect(error).toHaveBeenCalledWith(
      expect.stringContaining("query q1: cannot free its owner's slot"),
    );
    expect(await registry.admit('ann', 'q2', 1)).toBeUndefined();
  });
});
