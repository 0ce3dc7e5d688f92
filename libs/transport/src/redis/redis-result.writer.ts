import type { ChainableCommander } from 'ioredis';
import type { RedisClient } from './redis.connector';
import { Script, luaScript, scriptFile } from './lua.script';
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
 * Appends whose records carry at least this many bytes, and record no end, go as a MULTI of XADD,
 * EXPIRE, XLEN and EXISTS rather than through APPEND: a script's arguments are copied into Lua
 * and again into XADD's, about 1.5 ms of Redis's CPU per MB; the MULTI's few more commands cost
 * less than that from here on.
 */
export const MULTI_APPEND_BYTES = 64 * 1024;

/** What an append found: the stream's length and whether a cancel is there. */
interface Appended {
  length: number;
  cancelled: boolean;
}

/** Body bytes of `records`. */
function bytesOf(records: ResultRecord[]): number {
  let bytes = 0;
  for (const record of records) if (record.kind !== 'error') bytes += record.bytes.length;
  return bytes;
}

/** Runs `multi` (a poll); any failure of it (Redis gone or failing over) is ResultStreamLostError. */
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

/** A move of a query's record, as includes/moveQuery takes it: the record's key and its ARGV. */
export interface QueryMove {
  meta: string;
  args: string[];
}

/**
 * What records the query's end with its stream's last entry (`end`: that entry; `produced`: the
 * rows and body bytes of every entry written, that one included): the move of its record, run
 * in the same script as the entry's append, so that the end is recorded if and only if the
 * entry is written.
 */
export type EndRecorder = (end: ResultRecord, produced: Produced) => QueryMove | undefined;

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
   * command again when its connection dropped before the reply, and an append that had run would
   * then add its chunk twice; an id of its own makes Redis refuse the second.
   */
  private appended = 0;

  private readonly window: FlowWindow;
  private readonly ttlSeconds: number;
  private readonly pollMs: number;
  private readonly needsConsumer: boolean;
  private readonly recordEnd: EndRecorder | undefined;
  private readonly appendScript: Script;

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
    this.appendScript = luaScript(redis, scriptFile('appendEntries'));
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
    const appended = await this.append([record], { readBack: true });
    this.inFlight.push(size);
    this.inFlightBytes += size;
    if (!appended) return;
    this.settle(appended.length);
    // Cancelled meanwhile: this record is in the stream, so the next write is the one refused
    // (a refusal always means "not written": the body's end sends what it left; BodyWriter).
    if (!terminal && appended.cancelled) this.interrupted ??= 'cancelled';
  }

  async writeFinal(records: ResultRecord[]): Promise<void> {
    if (records.length === 0) return;
    // A kept result that failed keeps only its error (CappedResultWriter): what came before goes.
    // XTRIM, not DEL: the stream keeps its last id, so a reader part-way through reads the error
    // next; by id, so that the append sent again drops nothing it wrote.
    const trim = !this.needsConsumer && records[records.length - 1].kind === 'error';
    await this.append(records, { readBack: false, trimTo: trim ? this.idOf(1) : undefined });
  }

  /**
   * Appends `records` in one step (APPEND, or a MULTI for large entries), with the query's end when they end it (and the recorder
   * records it), trimmed to `trimTo` when given. Returns what flow control needs when `readBack`;
   * undefined when not asked, or when the stream already held them (the same append, sent again,
   * ran once already). Any other failure is ResultStreamLostError.
   */
  private async append(
    records: ResultRecord[],
    { readBack, trimTo }: { readBack: boolean; trimTo?: string },
  ): Promise<Appended | undefined> {
    const produced = { ...this.produced };
    for (const record of records) {
      if (record.kind === 'error') continue;
      produced.bytes += record.bytes.length;
      if (record.kind !== 'head') produced.rows += record.rows ?? 0;
    }
    const end = records.at(-1);
    const recorder = this.recordedEnd ? undefined : this.recordEnd;
    const recorded = recorder !== undefined && end !== undefined && isTerminal(end);
    const move = recorded ? recorder(end, produced) : undefined;
    let appended: Appended | undefined;
    try {
      const [length, cancelled] =
        move === undefined && bytesOf(records) >= MULTI_APPEND_BYTES
          ? await this.appendInMulti(records, { readBack, trimTo })
          : await this.appendByScript(records, { readBack, trimTo, move });
      if (readBack) appended = { length, cancelled: cancelled > 0 };
    } catch (err) {
      const last = this.idOf(records.length);
      const resent =
        err instanceof Error &&
        NOT_PAST_TOP.test(err.message) &&
        (await this.isLast(last).catch(() => false));
      if (!resent) throw new ResultStreamLostError(err);
    }
    this.appended += records.length;
    Object.assign(this.produced, produced);
    this.recordedEnd ||= recorded;
    return appended;
  }

  /** APPEND over `records`, with the record's `move` when given. */
  private async appendByScript(
    records: ResultRecord[],
    { readBack, trimTo, move }: { readBack: boolean; trimTo?: string; move?: QueryMove },
  ): Promise<number[]> {
    const keys = move ? [this.key, this.cancelKey, move.meta] : [this.key, this.cancelKey];
    const args: (string | Buffer)[] = [
      String(keys.length),
      ...keys,
      String(this.ttlSeconds),
      trimTo ?? '',
      readBack ? '1' : '0',
      String(records.length),
    ];
    records.forEach((record, i) => {
      const fields = recordFields(this.withEnd(record));
      args.push(this.idOf(i + 1), String(fields.length), ...fields);
    });
    if (move) args.push(...move.args);
    return (await this.appendScript(...args)) as number[];
  }

  /**
   * What APPEND does without a move, as a MULTI: the entries, the trim, the TTL and the read-back.
   * An id the stream has passed is refused at its XADD, as in the script (the other commands run
   * again, which changes nothing); that refusal, or any other error, is thrown.
   */
  private async appendInMulti(
    records: ResultRecord[],
    { readBack, trimTo }: { readBack: boolean; trimTo?: string },
  ): Promise<number[]> {
    const multi = this.redis.multi();
    records.forEach((record, i) => {
      multi.xadd(this.key, this.idOf(i + 1), ...recordFields(this.withEnd(record)));
    });
    if (trimTo !== undefined) multi.xtrim(this.key, 'MINID', trimTo);
    multi.expire(this.key, this.ttlSeconds);
    if (readBack) multi.xlen(this.key).exists(this.cancelKey);
    const result = await multi.exec();
    if (!result) throw new Error('the transaction was aborted');
    for (const [err] of result) if (err) throw err;
    return readBack ? result.slice(-2).map(([, value]) => Number(value)) : [];
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
    if (record.kind !== 'end' && record.kind !== 'error') return record;
    // A copy, then the field: a spread literal with a field added takes V8's slow path.
    const recorded = { ...record };
    recorded.recorded = true;
    return recorded;
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
