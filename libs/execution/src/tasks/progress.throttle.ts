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
   * sooner costs a timer, no report. `made` gives the totals when the report is due.
   */
  async during<T>(waiting: Promise<T>, made: () => Produced): Promise<T> {
    const due = Math.max(0, this.everyMs - (Date.now() - this.last));
    const timer = setTimeout(() => {
      this.last = Date.now();
      this.report(made());
    }, due);
    try {
      return await waiting;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Called after each chunk with the totals so far. */
  tick(made: Produced, now = Date.now()): void {
    if (now - this.last < this.everyMs) return;
    this.last = now;
    this.report(made);
  }
}
