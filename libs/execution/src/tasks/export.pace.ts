import { setTimeout as sleep } from 'node:timers/promises';
import type { Pace } from './query.runner';

/** Interactive work counts as under way this long after a statement of it started (ms). */
export const INTERACTIVE_RECENT_MS = 100;

/**
 * Where the threads of one process tell each other when an interactive statement last started
 * (one BigInt64 of epoch ms, over a SharedArrayBuffer every thread gets).
 */
export class InteractiveClock {
  private readonly last: BigInt64Array;

  constructor(shared: SharedArrayBuffer) {
    this.last = new BigInt64Array(shared);
  }

  started(now = Date.now()): void {
    Atomics.store(this.last, 0, BigInt(now));
  }

  /** Whether an interactive statement started in the last INTERACTIVE_RECENT_MS. */
  recent(now = Date.now()): boolean {
    return now - Number(Atomics.load(this.last, 0)) < INTERACTIVE_RECENT_MS;
  }
}

/**
 * An export's pace: while interactive statements come in this process, it waits `yieldMs` before
 * each further batch, so that it — and its backend in PostgreSQL, which produces rows only as
 * they are asked for — leaves them the CPU; otherwise (or with `yieldMs` 0) it goes on at once.
 */
export function exportPace(clock: InteractiveClock, yieldMs: number): Pace {
  return () => (yieldMs > 0 && clock.recent() ? sleep(yieldMs) : undefined);
}
