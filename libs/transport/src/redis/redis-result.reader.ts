import type Redis from 'ioredis';
import { ResultRecord } from '@app/contracts';
import { ReaderClosedError, ReaderHooks, ResultReader } from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { parseRecord } from './stream.codec';

export interface ReaderOptions {
  /** How long one XREAD blocks. */
  blockMs: number;
  /** After this long without a record, ask `onSilence` whether the producer is still alive. */
  silenceMs: number;
  ttlSeconds: number;
  /** How often the query's alive key is refreshed; it lives three beats. */
  beatMs: number;
}

/**
 * Gives the reader's blocking connection back to whoever lent it, once; `busy` when a blocking
 * read may still be pending on it (it must then be dropped, which also ends that read).
 */
export type GiveBack = (connection: Redis, busy: boolean) => void;

/**
 * Reads one query's stream in order with a blocking XREAD on a connection of its own, deletes
 * what it has handed out so that the writer's window moves on, and keeps the query's alive key
 * fresh while it is open (the worker stops the statement when the key expires). Everything it
 * holds — the connection, the keep-alive timer, the keys — is released by `close()`.
 */
export class RedisResultReader implements ResultReader {
  private readonly key: string;
  private readonly cancelKey: string;
  private readonly aliveKey: string;
  private lastId = '0-0';
  private readonly buffered: ResultRecord[] = [];
  private taken: string[] = [];
  private inFlight = false;
  private closed = false;
  private closing: Promise<void> | undefined;
  private readonly heartbeat: NodeJS.Timeout;

  constructor(
    private readonly blocking: Redis,
    private readonly shared: Redis,
    keys: RedisKeys,
    queryId: string,
    private readonly hooks: ReaderHooks,
    private readonly options: ReaderOptions,
    private readonly giveBack: GiveBack,
  ) {
    this.key = keys.out(queryId);
    this.cancelKey = keys.cancel(queryId);
    this.aliveKey = keys.alive(queryId);
    this.beat();
    this.heartbeat = setInterval(() => this.beat(), options.beatMs);
  }

  async next(): Promise<ResultRecord> {
    let silentSince = Date.now();
    while (this.buffered.length === 0) {
      this.assertOpen();
      await this.releaseTaken();
      // Checked after every wait: a reader closed meanwhile must not touch its connection again
      // (it may be back in the pool, or dropped).
      this.assertOpen();
      this.inFlight = true;
      let reply: [Buffer, [Buffer, Buffer[]][]][] | null;
      try {
        reply = await this.blocking.xreadBuffer(
          'COUNT',
          64,
          'BLOCK',
          this.options.blockMs,
          'STREAMS',
          this.key,
          this.lastId,
        );
      } catch (err) {
        // close() drops a connection blocked in XREAD, which fails the read: say why.
        this.assertOpen();
        throw err;
      } finally {
        this.inFlight = false;
      }
      this.assertOpen();
      if (reply && reply.length > 0) {
        for (const [id, fields] of reply[0][1]) {
          this.lastId = id.toString();
          this.taken.push(this.lastId);
          this.buffered.push(parseRecord(fields));
        }
        silentSince = Date.now();
      } else if (Date.now() - silentSince >= this.options.silenceMs) {
        const verdict = await this.hooks.onSilence();
        this.assertOpen();
        if (verdict) return verdict;
        silentSince = Date.now();
      }
    }
    return this.buffered.shift()!;
  }

  async cancel(): Promise<void> {
    await this.shared.set(this.cancelKey, '1', 'EX', this.options.ttlSeconds);
  }

  close(): Promise<void> {
    this.closing ??= this.release();
    return this.closing;
  }

  private async release(): Promise<void> {
    this.closed = true;
    clearInterval(this.heartbeat);
    this.buffered.length = 0;
    this.taken = [];
    this.giveBack(this.blocking, this.inFlight);
    // Same hash tag: one round trip, also in Redis Cluster. Issued after any beat's SET on the
    // same connection, so the alive key cannot come back.
    await this.shared.multi().del(this.aliveKey).unlink(this.key).exec();
  }

  private beat(): void {
    if (this.closed) return;
    // A failed beat is harmless: the key lives three beats and the next one sets it again; a
    // Redis that stays away fails this reader's own reads, which ends the query.
    this.shared.set(this.aliveKey, '1', 'PX', this.options.beatMs * 3).catch(() => undefined);
    this.hooks.onBeat?.();
  }

  private assertOpen(): void {
    if (this.closed) throw new ReaderClosedError();
  }

  private async releaseTaken(): Promise<void> {
    if (this.taken.length === 0) return;
    const ids = this.taken;
    this.taken = [];
    await this.shared.xdel(this.key, ...ids);
  }
}
