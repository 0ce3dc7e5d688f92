import { ResultRecord } from '@app/contracts';
import { parseRecord } from './stream.codec';
import { ReaderHooks, ResultReader, ResultSource } from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { RedisKeptLedger } from './redis-kept.ledger';
import { RedisKeptReader } from './redis-kept.reader';
import { RedisResultReader } from './redis-result.reader';
import { RedisStreamMux } from './redis-stream.mux';
import { RedisClient, RedisConnector } from './redis.connector';

/** A reader refreshes its query's alive key this often; the key lives three times as long. */
export const ALIVE_REFRESH_MS = 2000;
/**
 * How long the mux's XREAD blocks at most. New demand wakes it at once; the timeout only bounds
 * how long a connection that died without a word goes unnoticed.
 */
const BLOCK_MS = 1000;

export interface RedisSourceOptions {
  /** Makes the blocking connections (the mux's, kept readers'). */
  connector: RedisConnector;
  silenceMs: number;
  ttlSeconds: number;
  /** How long one XREAD of the mux blocks at most (default 1000 ms). */
  blockMs?: number;
  /** How often a reader refreshes its query's alive key (default ALIVE_REFRESH_MS). */
  beatMs?: number;
}

/** What a source holds right now (for tests and metrics). */
export interface ResultSourceStats {
  /** Readers opened and not yet closed. */
  open: number;
  /** Blocking connections, made at first use and kept: the mux's one (per group). */
  connections: number;
  /** Readers waiting for records now: those the mux reads for. */
  waiting: number;
}

/**
 * Hands out stream readers, all read through one RedisStreamMux: one blocking connection per api
 * process for small results and one for large ones, whatever the number of queries it reads.
 */
export class RedisResultSource implements ResultSource {
  private readonly mux: RedisStreamMux;
  private readonly readers = new Set<ResultReader>();
  private readonly ledger: RedisKeptLedger;

  constructor(
    private readonly shared: RedisClient,
    private readonly keys: RedisKeys,
    private readonly options: RedisSourceOptions,
  ) {
    this.ledger = new RedisKeptLedger(shared, keys);
    this.mux = new RedisStreamMux(shared, keys, {
      connector: options.connector,
      blockMs: options.blockMs ?? BLOCK_MS,
      connectionName: this.connectionName,
    });
  }

  /** The name the blocking connection carries in CLIENT LIST. */
  get connectionName(): string {
    return `${this.keys.prefix}:reader`;
  }

  get stats(): ResultSourceStats {
    return { open: this.readers.size, ...this.mux.stats };
  }

  open(queryId: string, hooks: ReaderHooks): ResultReader {
    const reader: RedisResultReader = new RedisResultReader(
      this.mux,
      this.shared,
      this.keys,
      queryId,
      hooks,
      {
        silenceMs: this.options.silenceMs,
        ttlSeconds: this.options.ttlSeconds,
        beatMs: this.options.beatMs ?? ALIVE_REFRESH_MS,
      },
      () => this.readers.delete(reader),
    );
    this.readers.add(reader);
    return reader;
  }

  openKept(queryId: string, hooks: ReaderHooks): ResultReader {
    const blocking = this.options.connector.connect({
      name: `${this.connectionName}:kept`,
      // As the shared connection: a read waits through one reconnect, then fails.
      maxRetriesPerRequest: 1,
    });
    // Its failures reach the reader through the commands it sends.
    blocking.on('error', () => undefined);
    const reader: RedisKeptReader = new RedisKeptReader(
      blocking,
      this.shared,
      this.keys,
      queryId,
      hooks,
      {
        blockMs: Math.min(1000, this.options.silenceMs),
        silenceMs: this.options.silenceMs,
        ttlSeconds: this.options.ttlSeconds,
      },
      () => this.readers.delete(reader),
    );
    // Closed with the source too: its connection would otherwise outlive a shutdown.
    this.readers.add(reader);
    return reader;
  }

  async kept(queryId: string): Promise<boolean> {
    return (await this.shared.exists(this.keys.out(queryId))) > 0;
  }

  async keptRecords(queryId: string): Promise<ResultRecord[]> {
    const entries = await this.shared.xrangeBuffer(this.keys.out(queryId), '-', '+');
    return entries.map(([, fields]) => parseRecord(fields));
  }

  async dropKept(queryId: string): Promise<void> {
    // Two commands, not one MULTI: the ledger's keys are in a Redis Cluster slot of their own.
    await Promise.all([this.shared.unlink(this.keys.out(queryId)), this.ledger.release(queryId)]);
  }

  keptBytes(): Promise<number> {
    return this.ledger.held();
  }

  async cancel(queryId: string): Promise<void> {
    await this.shared.set(this.keys.cancel(queryId), '1', 'EX', this.options.ttlSeconds);
  }

  async close(): Promise<void> {
    // Shutting down: a reader whose keys cannot be deleted now leaves them to their TTLs.
    await Promise.allSettled([...this.readers].map((reader) => reader.close()));
    await this.mux.close();
  }
}
