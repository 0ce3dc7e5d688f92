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

/** Redis's refusal of an XADD whose id is not past the stream's last: this writer's ids, sent again. */
const NOT_PAST_TOP = /equal or smaller than the target stream top item/;

/**
 * Runs `multi`; any failure of it (Redis gone or failing over) is ResultStreamLostError, except
 * the refusal of an append (at `appends`) whose id the stream has already passed: `resent` says
 * whether that id is the stream's last, the append of a MULTI that ran once already.
 */
async function execOrLost(
  multi: ChainableCommander,
  appends: number[] = [],
  resent: () => Promise<boolean> = () => Promise.resolve(false),
): Promise<[Error | null, unknown][]> {
  let result: [Error | null, unknown][] | null;
  try {
    result = await multi.exec();
  } catch (err) {
    throw new ResultStreamLostError(err);
  }
  if (!result) throw new ResultStreamLostError(new Error('the transaction was aborted'));
  let refused: Error | undefined;
  for (const [i, [err]] of result.entries()) {
    if (!err) continue;
    if (!appends.includes(i) || !NOT_PAST_TOP.test(err.message)) {
      throw new ResultStreamLostError(err);
    }
    refused = err;
  }
  if (refused && !(await resent().catch(() => false))) throw new ResultStreamLostError(refused);
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

/** How a RedisResultWriter writes one query's stream. */
export interface RedisWriterOptions {
  /** How far the writer may run ahead of its reader. */
  window: FlowWindow;
  /** How long the stream lives past its last write (s). */
  ttlSeconds: number;
  /** How often watch() looks for a cancel and for the consumer's liveness (SLUICE_CANCEL_POLL_MS). */
  pollMs: number;
  /**
   * A result kept for a later fetch: nobody need be reading while it is made, and one that ends
   * with an error keeps only that.
   */
  kept?: boolean;
  /** Records the query's end with the last entry; absent, whoever reads the end records it. */
  recordEnd?: EndRecorder;
}

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
  private recordedEnd = false;
  /**
   * Entries appended so far. Each entry's id is `0-<its number>`, not Redis's `*`: ioredis sends a
   * command again when its connection dropped before the reply, and a MULTI that had run would
   * then append its chunk twice; an id of its own makes Redis refuse the second.
   */
  private appended = 0;

  private readonly window: FlowWindow;
  private readonly ttlSeconds: number;
  private readonly pollMs: number;
  private readonly needsConsumer: boolean;
  private readonly recordEnd: EndRecorder | undefined;

  constructor(
    private readonly redis: RedisClient,
    keys: RedisKeys,
    queryId: string,
    options: RedisWriterOptions,
  ) {
    this.window = options.window;
    this.ttlSeconds = options.ttlSeconds;
    this.pollMs = options.pollMs;
    this.recordEnd = options.recordEnd;
    this.needsConsumer = !options.kept;
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
    const id = this.idOf(1);
    const multi = this.redis
      .multi()
      .xadd(this.key, id, ...recordFields(this.withEnd(record)))
      .expire(this.key, this.ttlSeconds)
      .xlen(this.key)
      .exists(this.cancelKey);
    const written = this.addEnd(multi, [record]);
    const result = await execOrLost(multi, [0], () => this.isLast(id));
    this.appended += 1;
    written();
    this.inFlight.push(size);
    this.inFlightBytes += size;
    this.settle(Number(result[2][1]));
    // Cancelled meanwhile: this record is in the stream, so the next write is the one refused
    // (a refusal always means "not written": the body's end sends what it left; BodyWriter).
    if (!terminal && Number(result[3][1]) > 0) this.interrupted ??= 'cancelled';
  }

  async writeFinal(records: ResultRecord[]): Promise<void> {
    if (records.length === 0) return;
    const multi = this.redis.multi();
    const appends = records.map((record, i) => {
      multi.xadd(this.key, this.idOf(i + 1), ...recordFields(this.withEnd(record)));
      return i;
    });
    // A kept result that failed keeps only its error (CappedResultWriter): what came before goes.
    // XTRIM, not DEL: the stream keeps its last id, so a reader part-way through reads the error
    // next; by id, so that the MULTI sent again drops nothing it wrote.
    if (!this.needsConsumer && records[records.length - 1].kind === 'error') {
      multi.xtrim(this.key, 'MINID', this.idOf(1));
    }
    multi.expire(this.key, this.ttlSeconds);
    const written = this.addEnd(multi, records);
    const last = this.idOf(records.length);
    await execOrLost(multi, appends, () => this.isLast(last));
    this.appended += records.length;
    written();
  }

  /** The id of the `n`-th entry from now (1: the next). */
  private idOf(n: number): string {
    return `0-${this.appended + n}`;
  }

  /** Whether `id` is the last the stream was given: its append ran, and nobody wrote after it. */
  private async isLast(id: string): Promise<boolean> {
    const info = (await this.redis.xinfo('STREAM', this.key)) as unknown[];
    const at = info.indexOf('last-generated-id');
    return at >= 0 && info[at + 1] === id;
  }

  /** Whether the query's end was recorded with the stream's last entry (by `recordEnd`). */
  get endRecorded(): boolean {
    return this.recordedEnd;
  }

  /** The record as written: a terminal one says that its end is recorded with it, when it is. */
  private withEnd(record: ResultRecord): ResultRecord {
    if (!this.recordEnd || this.recordedEnd) return record;
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
    const recorder = this.recordedEnd ? undefined : this.recordEnd;
    const recorded = recorder !== undefined && end !== undefined && isTerminal(end);
    if (recorded) recorder(multi, end, produced);
    return () => {
      Object.assign(this.produced, produced);
      this.recordedEnd ||= recorded;
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
