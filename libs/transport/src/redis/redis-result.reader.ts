import type Redis from 'ioredis';
import { ResultRecord } from '@app/contracts';
import { ResultReader } from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { parseRecord } from './stream.codec';

export interface ReaderOptions {
  /** How long one XREAD blocks. */
  blockMs: number;
  /** After this long without a record, ask `onSilence` whether the producer is still alive. */
  silenceMs: number;
  /** Returns a terminal record when the producer is known dead, undefined to keep waiting. */
  onSilence: () => Promise<ResultRecord | undefined>;
  ttlSeconds: number;
}

/**
 * Reads one query's stream in order with a blocking XREAD on a connection of its own, and deletes
 * what it has handed out so that the writer's window moves on.
 */
export class RedisResultReader implements ResultReader {
  private readonly key: string;
  private readonly cancelKey: string;
  private lastId = '0-0';
  private readonly buffered: ResultRecord[] = [];
  private taken: string[] = [];
  private inFlight = false;

  constructor(
    private readonly blocking: Redis,
    private readonly shared: Redis,
    keys: RedisKeys,
    queryId: string,
    private readonly options: ReaderOptions,
  ) {
    this.key = keys.out(queryId);
    this.cancelKey = keys.cancel(queryId);
  }

  async next(): Promise<ResultRecord> {
    let silentSince = Date.now();
    while (this.buffered.length === 0) {
      await this.releaseTaken();
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
      } finally {
        this.inFlight = false;
      }
      if (reply && reply.length > 0) {
        for (const [id, fields] of reply[0][1]) {
          this.lastId = id.toString();
          this.taken.push(this.lastId);
          this.buffered.push(parseRecord(fields));
        }
        silentSince = Date.now();
      } else if (Date.now() - silentSince >= this.options.silenceMs) {
        const verdict = await this.options.onSilence();
        if (verdict) return verdict;
        silentSince = Date.now();
      }
    }
    return this.buffered.shift()!;
  }

  /** True while a blocking read is pending on the connection. */
  get reading(): boolean {
    return this.inFlight;
  }

  async cancel(): Promise<void> {
    await this.shared.set(this.cancelKey, '1', 'EX', this.options.ttlSeconds);
  }

  async close(): Promise<void> {
    this.buffered.length = 0;
    this.taken = [];
    await this.shared.unlink(this.key);
  }

  private async releaseTaken(): Promise<void> {
    if (this.taken.length === 0) return;
    const ids = this.taken;
    this.taken = [];
    await this.shared.xdel(this.key, ...ids);
  }
}
