import { createHash } from 'node:crypto';
import { type OnReadOpts, Socket, type SocketConstructorOpts } from 'node:net';
import { Pool, PoolClient } from 'pg';
import { DEFAULT_CONNECT_TIMEOUT_MS, connectingWithin, loginUrl, type PgLogin } from '@app/access';
import { readDataRowsOnDemand } from './data-row.message';
import { threadReadBuffer } from './read.buffer';

/** Session settings that make every worker print values the same way; the connection check ends
 * a running statement soon after its worker died (PostgreSQL 14+). */
export const SESSION_OPTIONS =
  '-c TimeZone=UTC -c DateStyle=ISO -c IntervalStyle=postgres -c client_connection_check_interval=1000';

/**
 * A statement connection's socket, reading into the thread's one read buffer (threadReadBuffer)
 * instead of a new Buffer a read; pg calls it with its connection's settings. Under TLS the
 * socket's reads go through TLS's own handle, so such a socket reads as Node does.
 */
export function statementSocket(config: { ssl?: unknown }): Socket {
  if (config.ssl) return new Socket();
  // The parser must copy a cut message out of the shared buffer before the next read fills it.
  readDataRowsOnDemand();
  const buffer = threadReadBuffer();
  const onread: OnReadOpts = {
    buffer,
    callback: (bytes) => {
      // pg-protocol parses what its 'data' listener is given at once, as with Node's own reads.
      socket.emit('data', buffer.subarray(0, bytes));
      return true;
    },
  };
  // Node's Socket takes `onread` (since 12.10); this @types/node lists it for connect() only.
  const socket = new Socket({ onread } as SocketConstructorOpts);
  return socket;
}

export interface LoginPoolsSettings {
  /** DATABASE_URL: host, port and default database; its user and password are replaced. */
  baseUrl: string;
  /** Connections one (login, database) pool may hold. */
  poolSize: number;
  /** Statement connections this thread may hold, all pools together. */
  maxConnections: number;
  idleTimeoutMs: number;
  /** Longest a new connection may take (a wait for a busy pool's connection is not cut). */
  connectTimeoutMs?: number;
  /** Told the change in this thread's open connections (for the process-wide gauge). */
  onCount?: (delta: number) => void;
}

/**
 * One thread's statement connections: a pool per (login, database), at most `maxConnections` in
 * all. When a new connection would pass the cap, idle ones of the least recently used pools are
 * closed first; a caller waits only while every connection is busy. Pools left empty are dropped.
 */
export class LoginPools {
  /** Least recently used first (a Map keeps insertion order; use re-inserts). */
  private readonly pools = new Map<string, Pool>();
  private readonly waiters: (() => void)[] = [];
  private closing = 0;
  private counted = 0;

  constructor(private readonly settings: LoginPoolsSettings) {}

  /** Connections this thread holds now, open or closing. */
  get size(): number {
    let n = this.closing;
    for (const pool of this.pools.values()) n += pool.totalCount;
    return n;
  }

  async connect(login: PgLogin, database: string | undefined): Promise<PoolClient> {
    const key = this.keyOf(login, database);
    for (;;) {
      const pool = this.use(key, login, database);
      if (pool.idleCount > 0 || pool.totalCount >= this.settings.poolSize || this.hasRoom()) {
        try {
          return await pool.connect();
        } finally {
          this.changed();
        }
      }
      if (!(await this.evictIdle(pool))) await new Promise<void>((r) => this.waiters.push(r));
    }
  }

  /** Closes the pool of a database that turned out not to exist, or of a login that failed. */
  forget(login: PgLogin, database: string | undefined): void {
    const key = this.keyOf(login, database);
    const pool = this.pools.get(key);
    if (pool) void this.close(key, pool);
  }

  private hasRoom(): boolean {
    return this.size < this.settings.maxConnections;
  }

  private keyOf(login: PgLogin, database: string | undefined): string {
    // A new password (a database user who logged in again) gets a pool of its own.
    const secret = createHash('sha256').update(login.password).digest('base64url').slice(0, 16);
    return JSON.stringify([login.user, database ?? null, secret]);
  }

  private use(key: string, login: PgLogin, database: string | undefined): Pool {
    let pool = this.pools.get(key);
    if (pool) {
      this.pools.delete(key);
      this.pools.set(key, pool);
      return pool;
    }
    pool = new Pool({
      connectionString: loginUrl(this.settings.baseUrl, database, login),
      max: this.settings.poolSize,
      idleTimeoutMillis: this.settings.idleTimeoutMs,
      options: SESSION_OPTIONS,
      application_name: 'sluice',
      Client: connectingWithin(this.settings.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS),
      // pg calls it with its connection's settings; its types say it takes none.
      stream: statementSocket as () => Socket,
    });
    const created = pool;
    // An idle connection that dies is removed by the pool; it must not take the thread down.
    created.on('error', () => undefined);
    // Nor one that dies while a statement holds it (its backend terminated, PostgreSQL gone): pg
    // tells the statement's query, then emits 'error' on the client, which pg-pool listens to only
    // while the client is idle. The statement fails; the dead client is dropped when released.
    created.on('connect', (client) => client.on('error', () => undefined));
    created.on('release', () => this.changed());
    created.on('remove', () => {
      this.changed();
      if (created.totalCount === 0 && this.pools.get(key) === created)
        void this.close(key, created);
    });
    this.pools.set(key, created);
    return created;
  }

  /** Closes one idle connection of the least recently used other pool; false if there is none. */
  private async evictIdle(except: Pool): Promise<boolean> {
    for (const [key, pool] of this.pools) {
      if (pool === except || pool.idleCount === 0) continue;
      if (pool.idleCount === pool.totalCount && pool.waitingCount === 0) {
        await this.close(key, pool);
      } else {
        const client = await pool.connect();
        client.release(true);
      }
      return true;
    }
    return false;
  }

  private async close(key: string, pool: Pool): Promise<void> {
    if (this.pools.get(key) === pool) this.pools.delete(key);
    const n = pool.totalCount;
    this.closing += n;
    try {
      await pool.end();
    } catch {
      // Ending a pool only fails if it was ended already: nothing is left open either way.
    } finally {
      this.closing -= n;
      this.changed();
    }
  }

  /** Publishes the count and lets one waiter try again. */
  private changed(): void {
    const now = this.size;
    if (now !== this.counted) {
      this.settings.onCount?.(now - this.counted);
      this.counted = now;
    }
    this.waiters.shift()?.();
  }
}
