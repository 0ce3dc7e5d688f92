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

  /**
   * Awaits `waiting` — a write held up by a slow client, or the end of the result — and reports
   * the totals if it is still waiting when a report is due: rows made sat unreported there for as
   * long as the client took ("0 rows made" for seconds of a result made at once). A wait that ends
   * sooner costs a timer, no report.
   */
  async during<T>(waiting: Promise<T>, rows: number, bytes: () => number): Promise<T> {
    const due = Math.max(0, this.everyMs - (Date.now() - this.last));
    const timer = setTimeout(() => {
      this.last = Date.now();
      this.report({ rows, bytes: bytes() });
    }, due);
    try {
      return await waiting;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Called after each chunk with the totals so far. */
  tick(rows: number, bytes: number, now = Date.now()): void {
    if (now - this.last < this.everyMs) return;
    this.last = now;
    this.report({ rows, bytes });
  }
}
