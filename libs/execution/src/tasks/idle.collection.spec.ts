import { COLLECT_AFTER_BYTES, COLLECT_IDLE_MS, IdleCollection, exposedGc } from './idle.collection';

describe(IdleCollection.name, () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  const MB = 1024 * 1024;
  const limits = { afterBytes: 32 * MB, idleMs: 200 };

  it('collects once the thread has been idle idleMs after afterBytes of results, then counts afresh', () => {
    const collect = jest.fn();
    const idle = new IdleCollection(collect, limits);
    idle.started();
    idle.ended(40 * MB);
    jest.advanceTimersByTime(199);
    expect(collect).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(collect).toHaveBeenCalledTimes(1);
    // Counted afresh: small results after it do not collect again.
    idle.started();
    idle.ended(MB);
    jest.advanceTimersByTime(10_000);
    expect(collect).toHaveBeenCalledTimes(1);
  });

  it('never collects after small results, however many', () => {
    const collect = jest.fn();
    const idle = new IdleCollection(collect, limits);
    for (let i = 0; i < 1000; i++) {
      idle.started();
      idle.ended(1000);
    }
    jest.advanceTimersByTime(10_000);
    expect(collect).not.toHaveBeenCalled();
  });

  it('waits while a statement runs, and is put off by one that starts during the wait', () => {
    const collect = jest.fn();
    const idle = new IdleCollection(collect, limits);
    idle.started();
    idle.started();
    idle.ended(20 * MB);
    idle.ended(0);
    // Two statements' bytes together, but the second still ran: now idle, it waits.
    idle.started();
    idle.ended(20 * MB);
    jest.advanceTimersByTime(100);
    idle.started();
    jest.advanceTimersByTime(1_000);
    expect(collect).not.toHaveBeenCalled();
    idle.ended(0);
    jest.advanceTimersByTime(200);
    expect(collect).toHaveBeenCalledTimes(1);
  });

  it('defaults to 32 MiB and 200 ms', () => {
    expect({ COLLECT_AFTER_BYTES, COLLECT_IDLE_MS }).toEqual({
      COLLECT_AFTER_BYTES: 32 * MB,
      COLLECT_IDLE_MS: 200,
    });
  });
});

describe(exposedGc.name, () => {
  it('is a full collection: an object nothing holds is gone after it', async () => {
    const gc = exposedGc();
    expect(typeof gc).toBe('function');
    let held: object | undefined = { payload: 'x'.repeat(1000) };
    const ref = new WeakRef(held);
    held = undefined;
    // A WeakRef's target lives at least to the end of the turn that made it.
    await new Promise((resolve) => setImmediate(resolve));
    gc!();
    expect(ref.deref()).toBeUndefined();
    expect(held).toBeUndefined();
  });
});
