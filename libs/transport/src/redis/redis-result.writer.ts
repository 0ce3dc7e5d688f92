import type { RedisClient } from './redis.connector';
import { ResultRecord, isTerminal } from '@app/contracts';
import {
  FlowWindow,
  ProducerStoppedError,
  ResultWriter,
  StopReason,
  recordSize,
} from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { recordFields } from './stream.codec';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
    const result = await this.redis
      .multi()
      .xadd(this.key, '*', ...recordFields(record))
      .expire(this.key, this.ttlSeconds)
      .xlen(this.key)
      .exists(this.cancelKey)
      .exec();
    if (!result) throw new Error('result stream write was aborted');
    for (const [err] of result) if (err) throw err;
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
    for (const record of records) multi.xadd(this.key, '*', ...recordFields(record));
    const result = await multi.expire(this.key, this.ttlSeconds).exec();
    if (!result) throw new Error('result stream write was aborted');
    for (const [err] of result) if (err) throw err;
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
      const result = await this.redis.multi().xlen(this.key).exists(this.cancelKey).exec();
      if (!result) throw new Error('result stream poll was aborted');
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
