import { Logger } from '@nestjs/common';
import { ExecuteJobData, ResultRecord, Status, statusOf } from '@app/contracts';
import { QueryLifecycle } from '@app/execution';
import { ResultReader, ResultSource } from '@app/transport';
import { ExecutionTracker } from './execution.tracker';
import { SilenceCheck } from '../queries/producer.watch';

const logger = new Logger('Execution');

/**
 * One query as the api holds it, from the moment its result reader is opened: the reader and the
 * registry tracker, and the one way to let go of both. `fail(status)` ends it before a body
 * started; `close()` releases it however the response ended (a query that did not end is
 * cancelled). Both are idempotent, and whichever comes first wins.
 */
export class Execution {
  /** The query's end is recorded (or being recorded): nothing is left to cancel. */
  private finished = false;
  private closing: Promise<void> | undefined;

  private constructor(
    readonly queryId: string,
    private readonly reader: ResultReader,
    private readonly tracker: ExecutionTracker,
    /** Its result is kept: a client that leaves does not stop it (it may come back for it). */
    private readonly kept: boolean,
  ) {}

  /**
   * Opens the job's result reader from `results`, its end recorded through `lifecycle`; from here
   * on, the execution must be failed or closed. `onSilence`: what a silent producer is asked.
   */
  static open(
    job: ExecuteJobData,
    {
      results,
      lifecycle,
      onSilence,
    }: { results: ResultSource; lifecycle: QueryLifecycle; onSilence: SilenceCheck },
  ): Execution {
    const tracker = new ExecutionTracker(lifecycle, job.queryId, job.username, {
      database: job.database,
      format: job.format,
      lane: job.lane,
      kept: job.kept !== undefined || undefined,
      createdAt: job.enqueuedAt,
    });
    // A kept result (an asynchronous query's) is read without being taken away.
    const reader = job.kept
      ? results.openKept(job.queryId, { onSilence })
      : results.open(job.queryId, {
          onSilence,
          // The owner's slot lives as long as this reader does (and lapses soon after a lost
          // release).
          onBeat: () => tracker.keepSlot(),
        });
    return new Execution(job.queryId, reader, tracker, job.kept !== undefined);
  }

  /**
   * Holds its owner's slot, once admission took it, through the wait of a query whose result is
   * kept (it has no reader to renew the slot while it is queued).
   */
  holdSlotUntil(startBy: number): void {
    this.tracker.holdSlotUntil(startBy);
  }

  /** The query's next record (rejects with ReaderClosedError once closed). */
  next(): Promise<ResultRecord> {
    return this.reader.next();
  }

  /** Counts a record handed to the client. */
  sent(record: ResultRecord): void {
    this.tracker.sent(record);
  }

  /** Records the query's end, as its final record told it; close() then only releases. */
  async end(status: Status): Promise<void> {
    this.finished = true;
    await this.tracker.end(status);
  }

  /** Ends the execution before any body started: releases it, and records `status` as its end. */
  async fail(status: Status): Promise<void> {
    this.finished = true;
    await this.close();
    await this.tracker.end(status);
  }

  /** Whether its result is kept (a client that leaves does not stop it). */
  get keeps(): boolean {
    return this.kept;
  }

  /**
   * Lets go of a query whose result is kept (answered 202 before it came): the reader is closed,
   * the query runs on, and its worker records its end.
   */
  async detach(): Promise<void> {
    this.finished = true;
    await this.close();
  }

  /** Tells the query's producer to stop; what could not be sent is repaired by close(). */
  async cancel(): Promise<void> {
    await this.reader.cancel().catch((err: Error) =>
      // Repaired by close(): the worker also stops once the reader's alive key is gone.
      logger.warn(`query ${this.queryId}: could not send its cancel: ${err.message}`),
    );
  }

  /** Whether close() was called: a reader that fails after it was closed, not broken. */
  get closed(): boolean {
    return this.closing !== undefined;
  }

  /** Releases everything the execution holds; an unfinished query is cancelled. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.release();
    return this.closing;
  }

  private async release(): Promise<void> {
    // A kept result is made to its end whoever reads it: its worker records that end.
    if (this.kept) this.finished = true;
    if (!this.finished) {
      // The response ended before the result did: the client went away. Stop the producer.
      this.finished = true;
      await this.cancel();
      await this.tracker.end(statusOf('CANCELLED', 'client went away'));
    }
    await this.reader.close().catch((err: Error) =>
      // Repaired by Redis: the alive key lapses within seconds, the stream at its TTL.
      logger.warn(`query ${this.queryId}: could not release its result reader: ${err.message}`),
    );
  }
}
