import type { Produced } from '@app/transport';

/** How often a running query reports what it has produced, at most (ms). */
export const PROGRESS_EVERY_MS = 1000;

/**
 * Passes a running query's progress on at most once per `everyMs`, the first time `everyMs` after
 * it started: a query that ends sooner reports nothing (its end says it all), and a long one costs
 * one report a second, however small its chunks.
 */
export class ProgressThrottle {
  private last: number;

  constructor(
    private readonly report: (produced: Produced) => void,
    private readonly everyMs = PROGRESS_EVERY_MS,
    now = Date.now(),
  ) {
    this.last = now;
  }

  /** Called after each chunk with the totals so far. */
  tick(rows: number, bytes: number, now = Date.now()): void {
    if (now - this.last < this.everyMs) return;
    this.last = now;
    this.report({ rows, bytes });
  }
}
