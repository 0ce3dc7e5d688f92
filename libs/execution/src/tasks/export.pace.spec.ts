import { INTERACTIVE_RECENT_MS, InteractiveClock, exportPace } from './export.pace';

/** An export gives way while interactive statements come, and only then. */
describe(exportPace.name, () => {
  const clock = () => new InteractiveClock(new SharedArrayBuffer(BigInt64Array.BYTES_PER_ELEMENT));

  it('goes on at once while no interactive statement came lately', () => {
    const interactive = clock();
    expect(exportPace(interactive, 25)()).toBeUndefined();
    interactive.started(Date.now() - INTERACTIVE_RECENT_MS - 1);
    expect(exportPace(interactive, 25)()).toBeUndefined();
  });

  it('waits its yield after an interactive statement started, in any thread', async () => {
    const shared = new SharedArrayBuffer(BigInt64Array.BYTES_PER_ELEMENT);
    // Another thread's clock over the same memory.
    new InteractiveClock(shared).started();
    const pace = exportPace(new InteractiveClock(shared), 25);
    const started = Date.now();
    const waiting = pace();
    expect(waiting).toBeDefined();
    await waiting;
    expect(Date.now() - started).toBeGreaterThanOrEqual(20);
  });

  it('never waits with a yield of 0', () => {
    const interactive = clock();
    interactive.started();
    expect(exportPace(interactive, 0)()).toBeUndefined();
  });
});
