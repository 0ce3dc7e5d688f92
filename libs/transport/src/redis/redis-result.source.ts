import Redis from 'ioredis';
import { ResultRecord } from '@app/contracts';
import { ResultReader, ResultSource } from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { RedisResultReader } from './redis-result.reader';
import { recordFields } from './stream.codec';

/** The api refreshes a query's alive key this often; it lives three times as long. */
const ALIVE_REFRESH_MS = 2000;

export interface RedisSourceOptions {
  redisUrl: string;
  silenceMs: number;
  ttlSeconds: number;
  /** Idle blocking connections kept for reuse. */
  maxIdle?: number;
}

/**
 * Hands out stream readers. Each reader blocks on a connection of its own (XREAD BLOCK), taken
 * from a pool of such connections; no reader relies on a multi-key XREAD across queries.
 */
export class RedisResultSource implements ResultSource {
  private readonly idle: Redis[] = [];
  private readonly all = new Set<Redis>();

  constructor(
    private readonly shared: Redis,
    private readonly keys: RedisKeys,
    private readonly options: RedisSourceOptions,
  ) {}

  open(queryId: string, onSilence: () => Promise<ResultRecord | undefined>): ResultReader {
    const blocking = this.acquire();
    const reader = new RedisResultReader(blocking, this.shared, this.keys, queryId, {
      blockMs: Math.min(1000, this.options.silenceMs),
      silenceMs: this.options.silenceMs,
      onSilence,
      ttlSeconds: this.options.ttlSeconds,
    });
    const aliveKey = this.keys.alive(queryId);
    const beat = () =>
      this.shared.set(aliveKey, '1', 'PX', ALIVE_REFRESH_MS * 3).catch(() => undefined);
    void beat();
    const heartbeat = setInterval(() => void beat(), ALIVE_REFRESH_MS);
    const close = reader.close.bind(reader);
    let released = false;
    reader.close = async () => {
      if (!released) {
        released = true;
        clearInterval(heartbeat);
        await this.shared.del(aliveKey).catch(() => undefined);
        // A connection still blocked in XREAD would delay its next user: drop it instead.
        if (reader.reading) this.drop(blocking);
        else this.release(blocking);
      }
      await close();
    };
    return reader;
  }

  async cancel(queryId: string): Promise<void> {
    await this.shared.set(this.keys.cancel(queryId), '1', 'EX', this.options.ttlSeconds);
  }

  async abort(queryId: string, record: ResultRecord): Promise<void> {
    const key = this.keys.out(queryId);
    await this.shared
      .multi()
      .xadd(key, '*', ...recordFields(record))
      .expire(key, this.options.ttlSeconds)
      .exec();
  }

  async close(): Promise<void> {
    await Promise.all([...this.all].map((c) => c.quit().catch(() => c.disconnect())));
    this.all.clear();
    this.idle.length = 0;
  }

  private acquire(): Redis {
    const conn = this.idle.pop();
    if (conn && conn.status === 'ready') return conn;
    if (conn) this.drop(conn);
    const created = new Redis(this.options.redisUrl, { maxRetriesPerRequest: 2 });
    created.on('error', () => undefined);
    this.all.add(created);
    return created;
  }

  private release(conn: Redis): void {
    if (conn.status === 'ready' && this.idle.length < (this.options.maxIdle ?? 64)) {
      this.idle.push(conn);
    } else {
      this.drop(conn);
    }
  }

  private drop(conn: Redis): void {
    this.all.delete(conn);
    conn.disconnect();
  }
}
