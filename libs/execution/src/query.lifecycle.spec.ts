import { Logger } from '@nestjs/common';
import { okStatus, statusOf } from '@app/contracts';
import { InProcessQueryRegistry, QueryRecord } from '@app/transport';
import { QueryEnds } from './query.ends';
import { QueryLifecycle } from './query.lifecycle';
import { queuedRecord } from '@test/support/query-record';

/** A registry whose writes fail the first `failures` times (a Redis blip). */
class FlakyRegistry extends InProcessQueryRegistry {
  constructor(private failures: number) {
    super({ seconds: 60, count: 1000 });
  }

  override transition(
    ...args: Parameters<InProcessQueryRegistry['transition']>
  ): Promise<QueryRecord | undefined> {
    if (this.failures-- > 0) return Promise.reject(new Error('connection lost'));
    return super.transition(...args);
  }

  override move(...args: Parameters<InProcessQueryRegistry['move']>): Promise<void> {
    if (this.failures-- > 0) return Promise.reject(new Error('connection lost'));
    return super.move(...args);
  }

  override release(owner: string, queryId: string): Promise<void> {
    if (this.failures-- > 0) return Promise.reject(new Error('connection lost'));
    return super.release(owner, queryId);
  }
}

const query = { queryId: 'q1', owner: 'ann' };
const ok = okStatus('OK');

async function queued(lifecycle: QueryLifecycle, registry: InProcessQueryRegistry): Promise<void> {
  await lifecycle.begin(queuedRecord('q1'));
  expect(await registry.admit('ann', 'q1', 1)).toBe(0);
}

/** The ends `lifecycle` tells, kept for whoever asks (as the api's request log keeps them). */
function heard(lifecycle: QueryLifecycle): QueryEnds {
  const ends = new QueryEnds();
  lifecycle.onEnd((queryId, record) => ends.told(queryId, record));
  return ends;
}

describe(QueryLifecycle.name, () => {
  afterEach(() => jest.restoreAllMocks());

  it('moves a query forward only, and the first final state wins', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    const lifecycle = new QueryLifecycle(registry);
    await queued(lifecycle, registry);
    await lifecycle.transition(query, 'running', { startedAt: 5 });
    await lifecycle.transition(query, 'streaming', { rows: 1, bytes: 10 });
    await lifecycle.transition(query, 'streaming', { rows: 2, bytes: 20 });
    // Back to running: not a way a query goes.
    await lifecycle.transition(query, 'running');
    expect((await registry.get('q1'))?.state).toBe('streaming');
    await lifecycle.transition(query, 'succeeded', { status: ok, rows: 3 });
    const ended = await registry.get('q1');
    expect(ended).toMatchObject({ state: 'succeeded', startedAt: 5, rows: 3, bytes: 20 });
    expect(ended?.finishedAt).toEqual(expect.any(Number));
    // A second process ending it late changes nothing.
    const cancel = statusOf('CANCELLED', 'client went away');
    await lifecycle.transition(query, 'cancelled', { status: cancel, rows: 9 });
    expect(await registry.get('q1')).toEqual(ended);
  });

  it('reads the record back only where someone listens for ends', async () => {
    for (const tellEnds of [false, true]) {
      const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
      const read = jest.spyOn(registry, 'transition');
      const moved = jest.spyOn(registry, 'move');
      const lifecycle = new QueryLifecycle(registry);
      if (tellEnds) lifecycle.onEnd(() => undefined);
      await queued(lifecycle, registry);
      await lifecycle.transition(query, 'running');
      await lifecycle.transition(query, 'succeeded', { status: ok });
      expect(read.mock.calls.map((call) => call[1])).toEqual(tellEnds ? ['succeeded'] : []);
      expect(moved.mock.calls.map((call) => call[1])).toEqual(
        tellEnds ? ['running'] : ['running', 'succeeded'],
      );
    }
  });

  it("frees the owner's slot when the query ends, and not before", async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    const lifecycle = new QueryLifecycle(registry);
    await queued(lifecycle, registry);
    await lifecycle.transition(query, 'running');
    expect(await registry.admit('ann', 'q2', 1)).toBeUndefined();
    await lifecycle.transition(query, 'failed', { status: statusOf('INTERNAL') });
    expect(await registry.admit('ann', 'q2', 1)).toBe(0);
  });

  it('tells a waiter the end as it is recorded, and one who asks later at once', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    const lifecycle = new QueryLifecycle(registry);
    const ends = heard(lifecycle);
    await queued(lifecycle, registry);
    const waiting = ends.ended('q1', 60_000);
    await lifecycle.transition(query, 'succeeded', { status: ok });
    expect(await waiting).toMatchObject({ queryId: 'q1', state: 'succeeded' });

    await lifecycle.begin({ ...(await registry.get('q1'))!, queryId: 'q2', state: 'queued' });
    await lifecycle.transition({ queryId: 'q2', owner: 'ann' }, 'failed', {
      status: statusOf('INTERNAL'),
    });
    expect(await ends.ended('q2', 0)).toMatchObject({ queryId: 'q2', state: 'failed' });
    // Told once: a second ask waits, and gives up.
    expect(await ends.ended('q2', 10)).toBeUndefined();
  });

  it('tells no end to a listener that stopped listening', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    const lifecycle = new QueryLifecycle(registry);
    const ends = new QueryEnds();
    const stop = lifecycle.onEnd((id, record) => ends.told(id, record));
    stop();
    await queued(lifecycle, registry);
    await lifecycle.transition(query, 'succeeded', { status: ok });
    expect(await ends.ended('q1', 10)).toBeUndefined();
  });

  it('tells no end for a step on the way', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
    const lifecycle = new QueryLifecycle(registry);
    const ends = heard(lifecycle);
    await queued(lifecycle, registry);
    await lifecycle.transition(query, 'running');
    await lifecycle.transition(query, 'streaming', { rows: 1 });
    expect(await ends.ended('q1', 10)).toBeUndefined();
  });

  it("records the end and frees the owner's slot through a registry that fails twice", async () => {
    const registry = new FlakyRegistry(0);
    const lifecycle = new QueryLifecycle(registry);
    await queued(lifecycle, registry);
    Object.assign(registry, { failures: 2 });
    await lifecycle.transition(query, 'succeeded', { status: ok });
    expect((await registry.get('q1'))?.state).toBe('succeeded');
    expect(await registry.admit('ann', 'q2', 1)).toBe(0);
  });

  it('logs the query id when the registry stays out of reach, and does not throw', async () => {
    const error = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const registry = new FlakyRegistry(0);
    const lifecycle = new QueryLifecycle(registry);
    const ends = heard(lifecycle);
    await queued(lifecycle, registry);
    Object.assign(registry, { failures: Number.POSITIVE_INFINITY });
    await expect(lifecycle.transition(query, 'running')).resolves.toBeUndefined();
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('query q1: could not record it'));
    const ending = ends.ended('q1', 60_000);
    await expect(lifecycle.transition(query, 'succeeded', { status: ok })).resolves.toBeUndefined();
    expect(error).toHaveBeenCalledWith(expect.stringContaining('query q1: cannot record'));
    expect(error).toHaveBeenCalledWith(
      expect.stringContaining("query q1: cannot free its owner's slot"),
    );
    // Whoever waits learns that nothing could be read, at once.
    expect(await ending).toBeUndefined();
    expect(await registry.admit('ann', 'q2', 1)).toBeUndefined();
  });
});
