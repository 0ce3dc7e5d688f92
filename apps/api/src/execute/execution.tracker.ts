import { Logger } from '@nestjs/common';
import { ResultRecord, Status, finalState } from '@app/contracts';
import { QueryLifecycle, QueryRef } from '@app/execution';
import { QueryRecord } from '@app/transport';

const PROGRESS_EVERY_MS = 500;
/** A query that ends sooner is never shown as streaming: one registry write saved per query. */
const STREAMING_AFTER_MS = 100;
const logger = new Logger('ExecutionTracker');

/** What the api knows of a query from its start, for the end it tells without reading it back. */
export type QueryAbout = Pick<QueryRecord, 'database' | 'format' | 'lane' | 'kept' | 'createdAt'>;

/**
 * Keeps one query's entry in the registry up to date from the api's side: streaming once its
 * body starts, rows and bytes sent (every half second), the final state, and the owner's slot
 * (renewed while the query's reader is open, released at the end).
 */
export class ExecutionTracker {
  rows = 0;
  bytes = 0;
  private written = false;
  private done = false;
  private timer: NodeJS.Timeout | undefined;
  private renewing = false;
  /** Admission leases the slot in the same write as the tracker is made. */
  private renewedAt = Date.now();
  private renewFailed = false;
  /** When the statement began, as its final record tells (the worker may record it later). */
  private startedAt: number | undefined;
  /** When its first rows went out from the worker, as its final record tells. */
  private streamingAt: number | undefined;
  /** The final record said its producer recorded the query's end with it. */
  private endRecorded = false;

  private readonly query: QueryRef;

  constructor(
    private readonly lifecycle: QueryLifecycle,
    private readonly queryId: string,
    owner: string,
    private readonly about?: QueryAbout,
  ) {
    this.query = { queryId, owner };
  }

  /** Counts a record handed to the client; the registry hears of it soon after, not each time. */
  sent(record: ResultRecord): void {
    if (record.kind === 'end') this.streamingAt ??= record.streamingAt;
    if (record.kind === 'end' || record.kind === 'error') {
      this.startedAt ??= record.startedAt;
      this.endRecorded ||= record.recorded === true;
    }
    if (record.kind === 'error') return;
    this.bytes += record.bytes.length;
    if (record.kind === 'data' || record.kind === 'end') this.rows += record.rows ?? 0;
    this.schedule();
  }

  /**
   * Keeps the owner's slot while the query lives (called on each beat of its reader): renewed
   * once a third of its lease has passed since admission or the last renewal, so a short query
   * never renews, and a long one has three tries per lease. A failed renewal is logged once and
   * repaired by the next beat; if none comes, the slot lapses.
   */
  keepSlot(): void {
    // Renewed a third of a lease after it was last taken or renewed.
    const renewAfterMs = this.lifecycle.slotLeaseMs / 3;
    if (this.done || this.renewing || Date.now() - this.renewedAt < renewAfterMs) return;
    this.renewing = true;
    this.renewedAt = Date.now();
    this.lifecycle
      .keepSlot(this.query)
      .then(
        () => {
          if (this.renewFailed) logger.log(`query ${this.queryId}: user slot renewed again`);
          this.renewFailed = false;
        },
        (err: Error) => {
          this.renewedAt = 0;
          if (!this.renewFailed) {
            logger.warn(`query ${this.queryId}: could not renew the user slot: ${err.message}`);
          }
          this.renewFailed = true;
        },
      )
      .finally(() => (this.renewing = false));
  }

  /**
   * Holds the owner's slot until `until` (epoch ms: the query's latest start) and one lease more:
   * a query whose result is kept has no reader to renew it while it waits in the queue, and the
   * worker that runs it renews it from its start to its end. Repaired by nothing if it fails: the
   * slot then lapses one lease after admission, as before.
   */
  holdSlotUntil(until: number): void {
    this.lifecycle
      .keepSlot(this.query, Math.max(0, until - Date.now()) + this.lifecycle.slotLeaseMs)
      .catch((err: Error) =>
        logger.warn(`query ${this.queryId}: could not hold the user slot: ${err.message}`),
      );
  }

  /**
   * Records the end, once (and frees the owner's slot). An end its producer recorded with the
   * final record is not written again: the slot is freed, and the end told as the api knows it.
   */
  async end(status: Status): Promise<void> {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    if (this.endRecorded && this.about) {
      const state = finalState(status);
      const { database, format, lane, kept, createdAt } = this.about;
      // Written out: a spread with fields added is built on V8's slow path (µs a record).
      await this.lifecycle.endedWithResult(this.query, {
        database,
        format,
        lane,
        kept,
        createdAt,
        queryId: this.query.queryId,
        owner: this.query.owner,
        state,
        statement: '',
        status,
        rows: this.rows,
        bytes: this.bytes,
        rowsProduced: this.rows,
        bytesProduced: this.bytes,
        startedAt: this.startedAt,
        streamingAt: this.streamingAt,
        finishedAt: Date.now(),
      });
      return;
    }
    await this.lifecycle.transition(this.query, finalState(status), {
      status,
      rows: this.rows,
      bytes: this.bytes,
      startedAt: this.startedAt,
      streamingAt: this.streamingAt,
    });
  }

  /** One write per half second at most, the first after 100 ms (short queries never need one). */
  private schedule(): void {
    if (this.timer || this.done) return;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.written = true;
        void this.lifecycle.transition(this.query, 'streaming', {
          rows: this.rows,
          bytes: this.bytes,
        });
      },
      this.written ? PROGRESS_EVERY_MS : STREAMING_AFTER_MS,
    );
  }
}
