import { QueryRecord } from '@app/transport';

/** How long an end heard waits to be asked for. */
const KEPT_MS = 10_000;
/** Most ends kept waiting to be asked for: the oldest go first. */
const KEPT_MOST = 10_000;

/**
 * The ends of queries this process recorded (QueryLifecycle.onEnd), kept a while for whoever asks
 * for one (the api's request log, which writes its line when the response closes, before or after
 * the end is recorded), so that nobody polls the registry for it.
 */
export class QueryEnds {
  /** Ends heard, by query id, oldest first; each kept until asked for or stale. */
  private readonly heard = new Map<string, { at: number; record: QueryRecord | undefined }>();
  private readonly waiting = new Map<string, (record: QueryRecord | undefined) => void>();

  /** Hears the end of `queryId` as the registry then held it (undefined: it could not be read). */
  told(queryId: string, record: QueryRecord | undefined): void {
    const waiter = this.waiting.get(queryId);
    if (waiter) return waiter(record);
    const now = Date.now();
    // Ends nobody asks for (a cancel of another api's query) go once stale.
    for (const [id, { at }] of this.heard) {
      if (now - at < KEPT_MS && this.heard.size < KEPT_MOST) break;
      this.heard.delete(id);
    }
    this.heard.set(queryId, { at: now, record });
  }

  /**
   * The record of a query as this process ended it, once it has (at once if it already did);
   * undefined after `waitMs`, or if the registry could not be read.
   */
  ended(queryId: string, waitMs: number): Promise<QueryRecord | undefined> {
    const heard = this.heard.get(queryId);
    if (heard) {
      this.heard.delete(queryId);
      return Promise.resolve(heard.record);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiting.delete(queryId);
        resolve(undefined);
      }, waitMs);
      this.waiting.set(queryId, (record) => {
        clearTimeout(timer);
        this.waiting.delete(queryId);
        resolve(record);
      });
    });
  }
}
