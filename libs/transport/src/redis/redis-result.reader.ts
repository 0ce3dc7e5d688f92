import type { RedisClient } from './redis.connector';
import { ResultRecord } from '@app/contracts';
import { ReaderClosedError, ReaderHooks, ResultReader } from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { BULK_BYTES, MuxSubscriber, RedisStreamMux, StreamEntry } from './redis-stream.mux';
import { parseRecord } from './stream.codec';

export interface ReaderOptions {
  /** After this long without a record, ask `onSilence` whether the producer is still alive. */
  silenceMs: number;
  ttlSeconds: number;
  /** How often the query's alive key is refreshed; it lives three beats. */
  beatMs: number;
}

function entryBytes(fields: Buffer[]): number {
  let bytes = 0;
  for (const field of fields) bytes += field.length;
  return bytes;
}

interface Waiter {
  resolve(record: ResultRecord): void;
  reject(err: Error): void;
}

/**
 * Reads one query's stream in order through the api's stream mux: while its next() waits with
 * nothing buffered, the mux reads the stream for it, and deletes what it was given before reading
 * again, so that the writer's window moves on. It keeps the query's alive key fresh while it is
 * open (the worker stops the statement when the key expires). Everything it holds — its place in
 * the mux, the keep-alive and silence timers, the keys — is released by `close()`.
 */
export class RedisResultReader implements ResultReader, MuxSubscriber {
  readonly key: string;
  lastId = '0-0';
  bulky = false;
  private readonly cancelKey: string;
  private readonly aliveKey: string;
  /** Entries read and not handed out yet, parsed as they are handed out. */
  private readonly buffered: Buffer[][] = [];
  /** Bytes given so far, counted until they make it bulky. */
  private given = 0;
  /** Ids of the entries read and not deleted yet. */
  private read: string[] = [];
  /** The pending next(), if any. */
  private waiter: Waiter | undefined;
  private silence: NodeJS.Timeout | undefined;
  /** Waiting for onSilence's verdict: the stream is not read meanwhile. */
  private asking = false;
  private closed = false;
  private closing: Promise<void> | undefined;
  private readonly heartbeat: NodeJS.Timeout;

  constructor(
    private readonly mux: RedisStreamMux,
    private readonly shared: RedisClient,
    keys: RedisKeys,
    queryId: string,
    private readonly hooks: ReaderHooks,
    private readonly options: ReaderOptions,
    /** Told once, when the reader closes. */
    private readonly onClose: () => void,
  ) {
    this.key = keys.out(queryId);
    this.cancelKey = keys.cancel(queryId);
    this.aliveKey = keys.alive(queryId);
    this.beat();
    this.heartbeat = setInterval(() => this.beat(), options.beatMs);
  }

  async next(): Promise<ResultRecord> {
    if (this.closed) throw new ReaderClosedError();
    if (this.waiter) throw new Error('next() called while another next() is pending');
    if (this.buffered.length > 0) return this.take();
    return new Promise<ResultRecord>((resolve, reject) => {
      this.waiter = { resolve, reject };
      this.wait();
    });
  }

  async cancel(): Promise<void> {
    await this.shared.set(this.cancelKey, '1', 'EX', this.options.ttlSeconds);
  }

  close(): Promise<void> {
    this.closing ??= this.release();
    return this.closing;
  }

  takeRead(): string[] {
    const ids = this.read;
    this.read = [];
    return ids;
  }

  deliver(entries: StreamEntry[]): void {
    if (this.closed) return;
    for (const [id, fields] of entries) {
      this.lastId = id.toString();
      this.read.push(this.lastId);
      this.buffered.push(fields);
      if (!this.bulky) this.given += entryBytes(fields);
    }
    this.bulky ||= this.given >= BULK_BYTES;
    // While onSilence is asked, its verdict hands out what came meanwhile.
    if (this.waiter && !this.asking) this.settle();
  }

  fail(err: Error): void {
    // A reader asking onSilence is not being read for: the verdict decides.
    if (this.closed || this.asking) return;
    this.stopSilence();
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.reject(err);
  }

  private async release(): Promise<void> {
    this.closed = true;
    clearInterval(this.heartbeat);
    this.stopSilence();
    this.mux.leave(this);
    this.onClose();
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.reject(new ReaderClosedError());
    this.buffered.length = 0;
    this.read = [];
    // One command (same hash tag, also in Redis Cluster), auto-pipelined with what else this
    // tick sends (the owner's slot freed at the end). Issued after any beat's SET on the same
    // connection, so the alive key cannot come back.
    await this.shared.unlink(this.aliveKey, this.key);
  }

  /** Waits in the mux for entries, and for a verdict on the producer after a quiet spell. */
  private wait(): void {
    // The timer first: a mux that fails the reader at once (closed) stops it with the read.
    this.silence = setTimeout(() => this.silent(), this.options.silenceMs);
    this.mux.want(this);
  }

  private silent(): void {
    this.silence = undefined;
    this.asking = true;
    this.mux.leave(this);
    this.hooks.onSilence().then(
      (verdict) => {
        this.asking = false;
        if (this.closed || !this.waiter) return;
        if (this.buffered.length > 0) this.settle();
        else if (verdict) this.answer(() => verdict);
        else this.wait();
      },
      (err: Error) => {
        this.asking = false;
        if (this.closed || !this.waiter) return;
        this.fail(err);
      },
    );
  }

  /** Hands the first buffered record to the pending next(). */
  private settle(): void {
    this.answer(() => this.take());
  }

  private answer(record: () => ResultRecord): void {
    this.stopSilence();
    const waiter = this.waiter!;
    this.waiter = undefined;
    try {
      waiter.resolve(record());
    } catch (err) {
      waiter.reject(err as Error);
    }
  }

  private take(): ResultRecord {
    return parseRecord(this.buffered.shift()!);
  }

  private stopSilence(): void {
    if (this.silence) clearTimeout(this.silence);
    this.silence = undefined;
  }

  private beat(): void {
    if (this.closed) return;
    // A failed beat is harmless: the key lives three beats and the next one sets it again; a
    // Redis that stays away fails this reader's reads, which ends the query.
    this.shared.set(this.aliveKey, '1', 'PX', this.options.beatMs * 3).catch(() => undefined);
    this.hooks.onBeat?.();
  }
}
