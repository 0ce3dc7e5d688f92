import { Logger } from '@nestjs/common';
import { ResultRecord, okStatus, statusOf } from '@app/contracts';
import { QueryEnds, QueryLifecycle } from '@app/execution';
import { InProcessQueryRegistry } from '@app/transport';
import { ExecutionTracker } from './execution.tracker';

/** The tracker's writes to the registry, timed with jest's clock over the in-process registry. */
const data = (rows: number, size = 10): ResultRecord => ({
  kind: 'data',
  rows,
  bytes: Buffer.alloc(size),
});

let registry: InProcessQueryRegistry;
let tracker: ExecutionTracker;
let updates: { at: number; changes: unknown }[];

beforeEach(async () => {
  jest.useFakeTimers({ now: 0 });
  registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
  updates = [];
  const move = registry.move.bind(registry);
  jest.spyOn(registry, 'move').mockImplementation((queryId, to, facts) => {
    // The steps on the way; the end is checked on its own.
    if (to === 'streaming') updates.push({ at: Date.now(), changes: { state: to, ...facts } });
    return move(queryId, to, facts);
  });
  await registry.create({
    queryId: 'q1',
    owner: 'ann',
    state: 'running',
    format: 'json',
    statement: 'select 1',
    createdAt: 0,
    rows: 0,
    bytes: 0,
  });
  expect(await registry.admit('ann', 'q1', 1)).toBe(0);
  tracker = new ExecutionTracker(new QueryLifecycle(registry), 'q1', 'ann');
});

afterEach(() => {
  jest.useRealTimers();
  jest.restoreAllMocks();
});

describe(ExecutionTracker.name, () => {
  it('never shows a query that ends within 100 ms as streaming', async () => {
    tracker.sent({ kind: 'head', columns: [], bytes: Buffer.alloc(5) });
    tracker.sent(data(3));
    await jest.advanceTimersByTimeAsync(99);
    await tracker.end(okStatus());
    await jest.advanceTimersByTimeAsync(5_000);
    expect(updates).toEqual([]);
    expect(await registry.get('q1')).toMatchObject({ state: 'succeeded', rows: 3, bytes: 15 });
  });

  it('does not write an end its producer recorded with the last record: frees the slot, tells it', async () => {
    const lifecycle = new QueryLifecycle(registry);
    const ends = new QueryEnds();
    lifecycle.onEnd((queryId, record) => ends.told(queryId, record));
    const about = { format: 'json', lane: 'interactive' as const, createdAt: 0 };
    tracker = new ExecutionTracker(lifecycle, 'q1', 'ann', about);
    await jest.advanceTimersByTimeAsync(40);
    tracker.sent({
      kind: 'end',
      status: okStatus(),
      bytes: Buffer.alloc(12),
      rows: 2,
      startedAt: 30,
      streamingAt: 35,
      recorded: true,
    });
    const transition = jest.spyOn(registry, 'transition');
    const move = jest.spyOn(registry, 'move');
    await tracker.end(okStatus());
    expect(transition).not.toHaveBeenCalled();
    expect(move).not.toHaveBeenCalled();
    // The producer's record stands (here: as created); the owner's slot is free again.
    expect((await registry.get('q1'))?.state).toBe('running');
    expect(await registry.admit('ann', 'q2', 1)).toBe(0);
    expect(await ends.ended('q1', 0)).toEqual({
      ...about,
      queryId: 'q1',
      owner: 'ann',
      state: 'succeeded',
      statement: '',
      status: okStatus(),
      rows: 2,
      bytes: 12,
      rowsProduced: 2,
      bytesProduced: 12,
      startedAt: 30,
      streamingAt: 35,
      finishedAt: 40,
    });
  });

  it('records an end its producer did not record (an older worker, a kept result)', async () => {
    tracker = new ExecutionTracker(new QueryLifecycle(registry), 'q1', 'ann', {
      format: 'json',
      createdAt: 0,
    });
    tracker.sent({ kind: 'error', status: statusOf('SYNTAX_ERROR') });
    await tracker.end(statusOf('SYNTAX_ERROR'));
    expect((await registry.get('q1'))?.state).toBe('failed');
  });

  it('shows the query streaming, with what was sent, 100 ms after its first record', async () => {
    await jest.advanceTimersByTimeAsync(1_000);
    tracker.sent({ kind: 'head', columns: [], bytes: Buffer.alloc(5) });
    tracker.sent(data(2, 20));
    await jest.advanceTimersByTimeAsync(99);
    expect(updates).toEqual([]);
    await jest.advanceTimersByTimeAsync(1);
    expect(updates).toEqual([{ at: 1_100, changes: { state: 'streaming', rows: 2, bytes: 25 } }]);
    expect(await registry.get('q1')).toMatchObject({ state: 'streaming', rows: 2, bytes: 25 });
  });

  it('writes progress at most every 500 ms however often records come, and none while idle', async () => {
    // A record every 10 ms for 2 s.
    for (let t = 0; t < 2_000; t += 10) {
      tracker.sent(data(1));
      await jest.advanceTimersByTimeAsync(10);
    }
    expect(updates.map((u) => u.at)).toEqual([100, 600, 1_100, 1_600]);
    // The last write counts what had been sent by then; nothing comes, so nothing is written.
    expect(updates[3].changes).toEqual({ state: 'streaming', rows: 160, bytes: 1_600 });
    await jest.advanceTimersByTimeAsync(5_000);
    expect(updates).toHaveLength(5);
    expect(updates[4]).toEqual({
      at: 2_100,
      changes: { state: 'streaming', rows: 200, bytes: 2_000 },
    });
    // The next record after a quiet spell waits its half second: it is not the first any more.
    tracker.sent(data(1));
    await jest.advanceTimersByTimeAsync(499);
    expect(updates).toHaveLength(5);
    await jest.advanceTimersByTimeAsync(1);
    expect(updates).toHaveLength(6);
  });

  it('records when the statement began and began streaming, as its final record tells, with the end', async () => {
    tracker.sent({
      kind: 'end',
      status: okStatus(),
      bytes: Buffer.alloc(2),
      startedAt: 42,
      streamingAt: 45,
    });
    await tracker.end(okStatus());
    expect(await registry.get('q1')).toMatchObject({
      state: 'succeeded',
      startedAt: 42,
      streamingAt: 45,
    });
  });

  it('records when a statement that failed began, from its error record', async () => {
    tracker.sent({ kind: 'error', status: statusOf('SYNTAX_ERROR'), startedAt: 7 });
    await tracker.end(statusOf('SYNTAX_ERROR'));
    expect(await registry.get('q1')).toMatchObject({ state: 'failed', startedAt: 7 });
  });

  it('does not count an error record as sent', async () => {
    tracker.sent({ kind: 'error', status: statusOf('INTERNAL') });
    await jest.advanceTimersByTimeAsync(1_000);
    expect(updates).toEqual([]);
    expect([tracker.rows, tracker.bytes]).toEqual([0, 0]);
  });

  it('records the end once, with its final state and counts, and writes no progress after it', async () => {
    const move = jest.spyOn(registry, 'move');
    tracker.sent(data(4, 40));
    const cancelled = statusOf('CANCELLED', 'client went away');
    await Promise.all([tracker.end(cancelled), tracker.end(okStatus())]);
    await tracker.end(statusOf('INTERNAL'));
    tracker.sent(data(1));
    await jest.advanceTimersByTimeAsync(5_000);
    expect(move.mock.calls).toEqual([
      ['q1', 'cancelled', { status: cancelled, rows: 4, bytes: 40 }],
    ]);
    expect(updates).toEqual([]);
    expect(await registry.get('q1')).toMatchObject({ state: 'cancelled', status: cancelled });
  });

  it('schedules no progress write for a record counted after the end', async () => {
    await tracker.end(okStatus());
    tracker.sent(data(1));
    await jest.advanceTimersByTimeAsync(5_000);
    expect(updates).toEqual([]);
  });

  it.each([
    ['succeeded', okStatus()],
    ['failed', statusOf('INTERNAL')],
    ['failed', statusOf('TIME_LIMIT', 'statement time limit exceeded')],
  ])('records the final state %s', async (state, status) => {
    await tracker.end(status);
    expect(await registry.get('q1')).toMatchObject({ state, status });
  });

  it("keeps the owner's slot until the end, then gives it back", async () => {
    const renew = jest.spyOn(registry, 'renew');
    // Just admitted: the lease is fresh, and a third of it (5 s) passes before a renewal.
    tracker.keepSlot();
    await jest.advanceTimersByTimeAsync(4_999);
    tracker.keepSlot();
    expect(renew).not.toHaveBeenCalled();
    await jest.advanceTimersByTimeAsync(1);
    tracker.keepSlot();
    tracker.keepSlot();
    await jest.advanceTimersByTimeAsync(2_000);
    tracker.keepSlot();
    expect(renew.mock.calls).toEqual([['ann', 'q1']]);
    expect(await registry.admit('ann', 'q2', 1)).toBeUndefined();
    await tracker.end(okStatus());
    expect(await registry.admit('ann', 'q2', 1)).toBe(0);
    // A beat that comes after the end renews nothing.
    tracker.keepSlot();
    expect(renew).toHaveBeenCalledTimes(1);
  });

  it('renews one slot at a time, and again after a renewal that failed', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    let answer!: (failure?: Error) => void;
    const renew = jest.spyOn(registry, 'renew').mockImplementation(
      () =>
        new Promise<void>((resolve, reject) => {
          answer = (failure) => (failure ? reject(failure) : resolve());
        }),
    );
    await jest.advanceTimersByTimeAsync(5_000);
    tracker.keepSlot();
    tracker.keepSlot(); // the first is still on its way
    expect(renew).toHaveBeenCalledTimes(1);
    answer(new Error('connection lost'));
    await jest.advanceTimersByTimeAsync(0);
    tracker.keepSlot();
    expect(renew).toHaveBeenCalledTimes(2);
    answer(new Error('connection lost'));
    await jest.advanceTimersByTimeAsync(0);
    // Logged once however many renewals fail in a row.
    expect(warn).toHaveBeenCalledTimes(1);
  });

  it('gives the slot back even when the end cannot be recorded, and does not throw', async () => {
    jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    jest.spyOn(registry, 'move').mockRejectedValue(new Error('connection lost'));
    const ending = tracker.end(okStatus());
    await jest.advanceTimersByTimeAsync(2_000); // its retries
    await expect(ending).resolves.toBeUndefined();
    expect(await registry.admit('ann', 'q2', 1)).toBe(0);
  });
});
