import { ResultRecord } from '@app/contracts';

/** Why a producer was told to stop. */
export type StopReason =
  | 'cancelled'
  | 'client-idle'
  | 'consumer-gone'
  | 'timeout'
  | 'shutdown'
  | 'too-large'
  | 'kept-full'
  | 'kept-user-full';

const STOP_MESSAGES: Record<StopReason, string> = {
  cancelled: 'query cancelled',
  'client-idle': 'client stopped reading',
  'consumer-gone': 'nobody is reading the result any more',
  timeout: 'statement time limit exceeded',
  shutdown: 'worker shutting down',
  'too-large':
    'the result is larger than an asynchronous query may keep (SLUICE_RESULT_MAX_BYTES; SLUICE_SPOOL_MAX_BYTES when kept results are spooled); run it without wait_timeout to stream it',
  'kept-full':
    'the kept results of asynchronous queries hold all the bytes they may together (SLUICE_RESULT_TOTAL_MAX_BYTES; SLUICE_SPOOL_TOTAL_MAX_BYTES when spooled); run it without wait_timeout to stream it, or fetch or drop kept results first',
  'kept-user-full':
    'your kept results hold all the bytes one user may keep (SLUICE_RESULT_USER_MAX_BYTES; SLUICE_SPOOL_USER_MAX_BYTES when spooled); drop some (DELETE /v1/queries/{id}) or let them expire, or run it without wait_timeout to stream it',
};

/** Thrown by a ResultWriter when the consumer cancelled or stopped reading for too long. */
export class ProducerStoppedError extends Error {
  constructor(readonly reason: StopReason) {
    super(STOP_MESSAGES[reason]);
    this.name = 'ProducerStoppedError';
  }
}

/** What a client is told when its result stream failed under the writer or the reader. */
export const RESULT_STREAM_LOST =
  'the result stream was lost: Redis is unavailable or failing over; retry the query';

/**
 * Thrown by a ResultWriter whose channel failed under it (Redis gone, or its node failing over):
 * the query ends unavailable, not as an internal error, whichever side notices first.
 */
export class ResultStreamLostError extends Error {
  constructor(cause: unknown) {
    super(`result stream write failed: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'ResultStreamLostError';
  }
}

/** Flow-control window: how far a producer may run ahead of its consumer. */
export interface FlowWindow {
  chunks: number;
  bytes: number;
  /** Producer gives up when the consumer takes nothing for this long. */
  idleTimeoutMs: number;
}

/** Producer side of one query's result channel. */
export interface ResultWriter {
  /** Appends a record; waits while the consumer is a full window behind. */
  write(record: ResultRecord): Promise<void>;
  /** Appends the last records of a result at once (one round trip), without waiting. */
  writeFinal(records: ResultRecord[]): Promise<void>;
  /** Calls `onStop` (once) when the consumer cancels or is gone; returns a function that stops watching. */
  watch(onStop: (reason: StopReason) => void): () => void;
  /** Makes a pending or later non-final write fail with ProducerStoppedError(reason). */
  interrupt(reason: StopReason): void;
  /**
   * Whether the query's end was recorded with its last record, in the same write (Redis's writer
   * of a result not kept): then nobody else need record it.
   */
  readonly endRecorded: boolean;
}

/** Thrown by a reader's `next()` once the reader is closed (also one pending at the time). */
export class ReaderClosedError extends Error {
  constructor() {
    super('result reader closed');
    this.name = 'ReaderClosedError';
  }
}

/** Consumer side of one query's result channel. */
export interface ResultReader {
  /**
   * The next record, in order; resolves with a terminal record at the end. Rejects with
   * ReaderClosedError once the reader is closed, also when the close came while it waited.
   */
  next(): Promise<ResultRecord>;
  /** Tells the producer to stop. */
  cancel(): Promise<void>;
  /**
   * Releases everything the reader holds (its connection, timers, the channel's data); the one
   * way out, idempotent: a second call returns the first one's promise.
   */
  close(): Promise<void>;
}

/** What the consumer of a reader is asked or told while it reads. */
export interface ReaderHooks {
  /** Asked after a quiet spell: is the producer gone (a terminal record) or not (undefined)? */
  onSilence(): Promise<ResultRecord | undefined>;
  /**
   * Called on each keep-alive beat of a reader that has them (Redis: every 2 s while it is open,
   * never after close), for what must live exactly as long as the reader does.
   */
  onBeat?(): void;
}

export function recordSize(record: ResultRecord): number {
  return record.kind === 'error' ? 256 : record.bytes.length + 64;
}

/** Opens readers on the consumer side (the api). */
export interface ResultSource {
  /** Opens the reader of a query; `hooks.onSilence` decides whether a quiet producer is gone. */
  open(queryId: string, hooks: ReaderHooks): ResultReader;
  /**
   * Opens a reader of a kept result (a job with `kept`) from its first record: it deletes
   * nothing, so the result can be read again until its TTL ends it; closing it leaves the query
   * running.
   */
  openKept(queryId: string, hooks: ReaderHooks): ResultReader;
  /**
   * The records a kept result holds now, at once, without waiting for more: a spooled result's
   * manifest (its records hold no bytes). Empty when nothing is kept.
   */
  keptRecords(queryId: string): Promise<ResultRecord[]>;
  /** Whether a kept result is still there to be read. */
  kept(queryId: string): Promise<boolean>;
  /** Deletes a kept result at once, and gives back the bytes it held. */
  dropKept(queryId: string): Promise<void>;
  /** Bytes all kept results hold now, together (bounded by SLUICE_RESULT_TOTAL_MAX_BYTES). */
  keptBytes(): Promise<number>;
  /** Asks the producer of a query to stop, from any api process. */
  cancel(queryId: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * The producer side of every query's channel, for those who start, run or drop jobs without
 * holding a query's ResultWriter: the worker's main thread, standalone's executor, and the api when
 * it removes a job that no worker took.
 */
export interface ResultSink {
  /**
   * Ends a query's channel with a terminal record when no writer will: its job never ran (waited
   * too long, its session ended, removed from the queue) or the task that ran it died.
   */
  end(queryId: string, record: ResultRecord): Promise<void>;
  /** Tells the producer of a running query to stop, as a consumer's cancel does (shutdown). */
  cancel(queryId: string): Promise<void>;
  /**
   * Whether a cancel was asked for the query: for a job taken before it starts, since a cancel
   * that came while its job was held (put off: userShareProcessor) could not take it off the
   * queue, and a running producer looks for one only after a poll.
   */
  cancelAsked(queryId: string): Promise<boolean>;
  /**
   * Whether nobody waits for the result of a query that needs a reader: the api that read it
   * died (its alive key lapsed) while its job waited in the queue.
   */
  readerGone(queryId: string): Promise<boolean>;
}
