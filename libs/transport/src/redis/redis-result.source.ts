import Redis from 'ioredis';
import { ReaderHooks, ResultReader, ResultSource } from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { RedisKeptReader } from './redis-kept.reader';
import { RedisResultReader } from './redis-result.reader';

/** A reader refreshes its query's alive key this often; the key lives three times as long. */
const ALIVE_REFRESH_MS = 2000;

export interface RedisSourceOptions {
  redisUrl: string;
  silenceMs: number;
  ttlSeconds: number;
  /** Idle blocking connections kept for reuse. */
  maxIdle?: number;
}

/** What a source holds right now (for tests and metrics). */
export interface ResultSourceStats {
  /** Readers opened and not yet closed. */
  open: number;
  /** Blocking connections, in use or idle. */
  connections: number;
  idle: number;
}

/**
 * Hands out stream readers. Each reader blocks on a connection of its own (XREAD BLOCK), taken
 * from a pool of such connections and given back when the reader closes; no reader relies on a
 * multi-key XREAD across queries.
 */
export class RedisResultSource implements ResultSource {
  private readonly idle: Redis[] = [];
  private readonly all = new Set<Redis>();
  private readonly readers = new Set<ResultReader>();

  constructor(
    private readonly shared: Redis,
    private readonly keys: RedisKeys,
    private readonly options: RedisSourceOptions,
  ) {}

  /** The name the blocking connections carry in CLIENT LIST. */
  get connectionName(): string {
    return `${this.keys.prefix}:reader`;
  }

  get stats(): ResultSourceStats {
    return { open: this.readers.size, connections: this.all.size, idle: this.idle.length };
  }

  open(queryId: string, hooks: ReaderHooks): ResultReader {
    const blocking = this.acquire();
    const reader: RedisResultReader = new RedisResultReader(
      blocking,
      this.shared,
      this.keys,
      queryId,
      hooks,
      {
        blockMs: Math.min(1000, this.options.silenceMs),
        silenceMs: this.options.silenceMs,
        ttlSeconds: this.options.ttlSeconds,
        beatMs: ALIVE_REFRESH_MS,
      },
      (connection, busy) => {
        this.readers.delete(reader);
        // A connection still blocked in XREAD would delay its next user: drop it instead.
        if (busy) this.drop(connection);
        else this.release(connection);
      },
    );
    this.readers.add(reader);
    return reader;
  }

  openKept(queryId: string, hooks: ReaderHooks): ResultReader {
    const blocking = this.shared.duplicate({ connectionName: `${this.connectionName}:kept` });
    // Its failures reach the reader through the commands it sends.
    blocking.on('error', () => undefined);
    return new RedisKeptReader(blocking, this.shared, this.keys, queryId, hooks, {
      blockMs: Math.min(1000, this.options.silenceMs),
      silenceMs: this.options.silenceMs,
      ttlSeconds: this.options.ttlSeconds,
    });
  }

  async kept(queryId: string): Promise<boolean> {
    return (await this.shared.exists(this.keys.out(queryId))) > 0;
  }

  async dropKept(queryId: string): Promise<void> {
    await this.shared.unlink(this.keys.out(queryId));
  }

  async cancel(queryId: string): Promise<void> {
    await this.shared.set(this.keys.cancel(queryId), '1', 'EX', this.options.ttlSeconds);
  }

  async close(): Promise<void> {
    // Shutting down: a reader whose keys cannot be deleted now leaves them to their TTLs.
    await Promise.allSettled([...this.readers].map((reader) => reader.close()));
    await Promise.all([...this.all].map((c) => c.quit().catch(() => c.disconnect())));
    this.all.clear();
    this.idle.length = 0;
  }

  private acquire(): Redis {
    const conn = this.idle.pop();
    if (conn && conn.status === 'ready') return conn;
    if (conn) this.drop(conn);
    const created = new Redis(this.options.redisUrl, {
      maxRetriesPerRequest: 2,
      connectionName: this.connectionName,
    });
    // Its failures reach the reader through the commands it sends; the event itself adds nothing.
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
