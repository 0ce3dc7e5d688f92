import type { ChainableCommander } from 'ioredis';
import type { RedisClient } from './redis.connector';
import { ResultRecord, isTerminal } from '@app/contracts';
import { Produced } from '../query.registry';
import {
  FlowWindow,
  ProducerStoppedError,
  ResultStreamLostError,
  ResultWriter,
  StopReason,
  recordSize,
} from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { recordFields } from './stream.codec';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `multi`; any failure of it (Redis gone or failing over) is ResultStreamLostError. */
async function execOrLost(multi: ChainableCommander): Promise<[Error | null, unknown][]> {
  let result: [Error | null, unknown][] | null;
  try {
    result = await multi.exec();
  } catch (err) {
    throw new ResultStreamLostError(err);
  }
  if (!result) throw new ResultStreamLostError(new Error('the transaction was aborted'));
  for (const [err] of result) if (err) throw new ResultStreamLostError(err);
  return result;
}

/**
 * Adds the query's end to the MULTI that writes its stream's last entry (`end`: that entry;
 * `produced`: the rows and body bytes of every entry written, that one included), so that the
 * end is recorded if and only if the entry is written.
 */
export type EndRecorder = (
  multi: ChainableCommander,
  end: ResultRecord,
  produced: Produced,
) => void;

/**
 * Appends a query's records to its Redis stream. The consumer deletes what it has taken, so the
 * stream's length is what is still in flight: the writer waits while that exceeds the window.
 */
export class RedisResultWriter implements ResultWriter {
  private readonly key: string;
  private readonly cancelKey: string;
  private readonly aliveKey: string;
  private interrupted: StopReason | undefined;
  /** Sizes of the entries written and not yet known to be consumed, oldest first. */
  private readonly inFlight: number[] = [];
  private inFlightBytes = 0;
  /** Rows and body bytes of the entries written so far. */
  private readonly produced: Produced = { rows: 0, bytes: 0 };
  /** The last entry went with the query's end (the recorder's). */
  private endRecorded = false;

  constructor(
    private readonly redis: RedisClient,
    keys: RedisKeys,
    queryId: string,
    private readonly window: FlowWindow,
    private readonly ttlSeconds: number,
    /** How often watch() looks for a cancel and for the consumer's liveness (SLUICE_CANCEL_POLL_MS). */
    private readonly pollMs: number,
    /**
     * False for a result kept for a later fetch: nobody need be reading while it is made, and one
     * that ends with an error keeps only that.
     */
    private readonly needsConsumer = true,
    /** Records the query's end with the last entry; absent, whoever reads the end records it. */
    private readonly recordEnd?: EndRecorder,
  ) {
    this.key = keys.out(queryId);
    this.cancelKey = keys.cancel(queryId);
    this.aliveKey = keys.alive(queryId);
  }

  watch(onStop: (reason: StopReason) => void): () => void {
    let done = false;
    const timer = setInterval(() => {
      this.redis
        .multi()
        .exists(this.cancelKey)
        .exists(this.aliveKey)
        .exec()
        .then((result) => {
          if (done || !result) return;
          if (Number(result[0][1]) > 0) stop('cancelled');
          // The api keeps this key alive while it reads; it expires within seconds of its death.
          else if (this.needsConsumer && Number(result[1][1]) === 0) stop('consumer-gone');
        })
        // Best effort: the next tick asks again; while Redis is away no cancel can be sent anyway.
        .catch(() => undefined);
    }, this.pollMs);
    const stop = (reason: StopReason) => {
      done = true;
      clearInterval(timer);
      onStop(reason);
    };
    return () => {
      done = true;
      clearInterval(timer);
    };
  }

  interrupt(reason: StopReason): void {
    this.interrupted ??= reason;
  }

  async write(record: ResultRecord): Promise<void> {
    const terminal = isTerminal(record);
    if (!terminal) {
      if (this.interrupted) throw new ProducerStoppedError(this.interrupted);
      await this.waitForRoom();
    }
    const size = recordSize(record);
    const multi = this.redis
      .multi()
      .xadd(this.key, '*', ...recordFields(this.withEnd(record)))
      .expire(this.key, this.ttlSeconds)
      .xlen(this.key)
      .exists(this.cancelKey);
    const written = this.addEnd(multi, [record]);
    const result = await execOrLost(multi);
    written();
    this.inFlight.push(size);
    this.inFlightBytes += size;
    this.settle(Number(result[2][1]));
    if (!terminal && Number(result[3][1]) > 0) throw new ProducerStoppedError('cancelled');
  }

  async writeFinal(records: ResultRecord[]): Promise<void> {
    const multi = this.redis.multi();
    // A kept result that failed keeps only its error (CappedResultWriter): what came before goes.
    // XTRIM, not DEL: the stream keeps its last id, so a reader part-way through reads the error next.
    if (!this.needsConsumer && records[records.length - 1]?.kind === 'error') {
      multi.xtrim(this.key, 'MAXLEN', 0);
    }
    for (const record of records) multi.xadd(this.key, '*', ...recordFields(this.withEnd(record)));
    multi.expire(this.key, this.ttlSeconds);
    const written = this.addEnd(multi, records);
    await execOrLost(multi);
    written();
  }

  /** Whether the query's end was recorded with the stream's last entry (by `recordEnd`). */
  get recorded(): boolean {
    return this.endRecorded;
  }

  /** The record as written: a terminal one says that its end is recorded with it, when it is. */
  private withEnd(record: ResultRecord): ResultRecord {
    if (!this.recordEnd || this.endRecorded) return record;
    return record.kind === 'end' || record.kind === 'error'
      ? { ...record, recorded: true }
      : record;
  }

  /**
   * Adds the query's end to `multi` when `records` end the query, with what they make the result
   * come to; returns what to count once `multi` succeeds (a second terminal record, reporting a
   * failure after an end that did not arrive, finds the end not recorded and records it then).
   */
  private addEnd(multi: ChainableCommander, records: ResultRecord[]): () => void {
    const produced = { ...this.produced };
    for (const record of records) {
      if (record.kind === 'error') continue;
      produced.bytes += record.bytes.length;
      if (record.kind !== 'head') produced.rows += record.rows ?? 0;
    }
    const end = records.at(-1);
    const recorder = this.endRecorded ? undefined : this.recordEnd;
    const recorded = recorder !== undefined && end !== undefined && isTerminal(end);
    if (recorded) recorder(multi, end, produced);
    return () => {
      Object.assign(this.produced, produced);
      this.endRecorded ||= recorded;
    };
  }

  /** Drops the entries the consumer has taken, given the stream's current length. */
  private settle(length: number): void {
    while (this.inFlight.length > length) this.inFlightBytes -= this.inFlight.shift()!;
  }

  private full(): boolean {
    return this.inFlight.length >= this.window.chunks || this.inFlightBytes >= this.window.bytes;
  }

  private async waitForRoom(): Promise<void> {
    if (!this.full()) return;
    let delay = 1;
    let idleSince = Date.now();
    while (this.full()) {
      await sleep(delay);
      if (this.interrupted) throw new ProducerStoppedError(this.interrupted);
      const before = this.inFlight.length;
      const result = await execOrLost(this.redis.multi().xlen(this.key).exists(this.cancelKey));
      if (Number(result[1][1]) > 0) throw new ProducerStoppedError('cancelled');
      this.settle(Number(result[0][1]));
      if (this.inFlight.length < before) {
        idleSince = Date.now();
        delay = 1;
      } else {
        // Back off while the client is slow; 50 ms keeps a stalled query cheap to watch.
        delay = Math.min(delay * 2, 50);
        if (Date.now() - idleSince > this.window.idleTimeoutMs) {
          throw new ProducerStoppedError('client-idle');
        }
      }
    }
  }
}
