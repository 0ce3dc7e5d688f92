import { LaneSlots, laneLimits } from './lane.slots';

const pool = (workerThreads: number, interactiveReserve = 1) => ({
  workerThreads,
  tasksPerThread: 2,
  interactiveReserve,
});

describe(laneLimits.name, () => {
  it('keeps the reserve threads of a pool serving both lanes out of export work', () => {
    expect(laneLimits(pool(4), ['interactive', 'export'])).toEqual({
      total: 8,
      export: 6,
      reserveKept: true,
    });
    expect(laneLimits(pool(4, 3), ['interactive', 'export']).export).toBe(2);
    expect(laneLimits(pool(4, 0), ['interactive', 'export']).export).toBe(8);
  });

  it('gives a single lane the whole pool', () => {
    expect(laneLimits(pool(4), ['export'])).toEqual({ total: 8, export: 8, reserveKept: true });
    expect(laneLimits(pool(4), ['interactive'])).toEqual({
      total: 8,
      export: 0,
      reserveKept: true,
    });
  });

  it('runs one export job at a time when no thread is left beyond the reserve, and says so', () => {
    expect(laneLimits(pool(1), ['interactive', 'export'])).toEqual({
      total: 2,
      export: 1,
      reserveKept: false,
    });
  });
});

describe(LaneSlots.name, () => {
  it('lets each lane take only what the other leaves, export never past its limit', () => {
    const slots = new LaneSlots(laneLimits(pool(3), ['interactive', 'export']));
    expect([slots.concurrency('interactive'), slots.concurrency('export')]).toEqual([6, 4]);
    for (let i = 0; i < 4; i += 1) slots.started('export');
    // Every export slot busy: the reserve's two are still the interactive lane's.
    expect([slots.concurrency('interactive'), slots.concurrency('export')]).toEqual([2, 4]);
    slots.started('interactive');
    slots.started('interactive');
    slots.ended('export');
    expect([slots.concurrency('interactive'), slots.concurrency('export')]).toEqual([3, 4]);
    for (let i = 0; i < 3; i += 1) slots.ended('export');
    for (let i = 0; i < 4; i += 1) slots.started('interactive');
    // Interactive jobs fill the pool: export may hold one (a BullMQ worker's least).
    expect(slots.concurrency('export')).toBe(1);
  });
});
