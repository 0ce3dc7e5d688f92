import type { RedisClient } from './redis.connector';
import { ResultRecord } from '@app/contracts';
import { ReaderClosedError, ReaderHooks, ResultReader } from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { parseRecord } from './stream.codec';

/**
 * Reads a kept result (an asynchronous query's) from its first record, deleting nothing: any
 * number of readers may read it, one after another or at once, until its TTL ends it. Blocks on a
 * connection of its own, closed by `close()` (kept results are fetched now and then, not per
 * request). A quiet producer is put to `hooks.onSilence` as any reader's is.
 */
export class RedisKeptReader implements ResultReader {
  private readonly key: string;
  private readonly cancelKey: string;
  private lastId = '0-0';
  private readonly buffered: ResultRecord[] = [];
  private closed = false;

  constructor(
    private readonly blocking: RedisClient,
    private readonly shared: RedisClient,
    keys: RedisKeys,
    queryId: string,
    private readonly hooks: ReaderHooks,
    private readonly options: { blockMs: number; silenceMs: number; ttlSeconds: number },
    /** Told once, when the reader closes. */
    private readonly onClose: () => void = () => undefined,
  ) {
    this.key = keys.out(queryId);
    this.cancelKey = keys.cancel(queryId);
  }

  async next(): Promise<ResultRecord> {
    let silentSince = Date.now();
    while (this.buffered.length === 0) {
      this.assertOpen();
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
        this.assertOpen();
        throw err;
      }
      this.assertOpen();
      if (reply && reply.length > 0) {
        for (const [id, fields] of reply[0][1]) {
          this.lastId = id.toString();
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
    if (this.closed) return Promise.resolve();
    this.closed = true;
    this.buffered.length = 0;
    this.onClose();
    // Ends a read still blocked on it; the result itself stays for the next reader.
    this.blocking.disconnect();
    return Promise.resolve();
  }

  private assertOpen(): void {
    if (this.closed) throw new ReaderClosedError();
  }
}
