import { Client, Pool } from 'pg';
import { TYPE_INFO_SQL, TypeCatalog, rowToTypeInfo } from '@app/sql';

/**
 * Session settings that make every worker print values the same way; the connection check ends
 * a running statement soon after its worker died (PostgreSQL 14+).
 */
const SESSION_OPTIONS =
  '-c TimeZone=UTC -c DateStyle=ISO -c IntervalStyle=postgres -c client_connection_check_interval=1000';
const MAX_DATABASES = 64;

/** A pool of connections to one database, and the type catalog of that database. */
export class DatabaseHandle {
  readonly pool: Pool;
  readonly catalog = new TypeCatalog();
  private catalogClient: Client | undefined;
  private catalogQueue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly url: string,
    poolSize: number,
  ) {
    this.pool = new Pool({
      connectionString: url,
      max: poolSize,
      idleTimeoutMillis: 30_000,
      options: SESSION_OPTIONS,
      application_name: 'sluice',
    });
    // An idle connection that dies must not take the thread down.
    this.pool.on('error', () => undefined);
  }

  /** Loads type info for the given OIDs (and what they refer to) on a connection of its own. */
  async ensureTypes(oids: number[]): Promise<void> {
    if (this.catalog.missing(oids).length === 0) return;
    const run = this.catalogQueue.then(async () => {
      let missing = this.catalog.missing(oids);
      while (missing.length > 0) {
        const client = await this.client();
        const { rows } = await client.query<Record<string, unknown>>(TYPE_INFO_SQL, [missing]);
        this.catalog.add(rows.map(rowToTypeInfo));
        const next = this.catalog.missing(oids);
        if (next.length === missing.length) break;
        missing = next;
      }
    });
    this.catalogQueue = run.catch(() => undefined);
    await run;
  }

  /** Cancels what a backend is running (pg_cancel_backend), from a connection of its own. */
  async cancelBackend(pid: number): Promise<void> {
    const run = this.catalogQueue.then(async () => {
      const client = await this.client();
      await client.query('SELECT pg_cancel_backend($1)', [pid]);
    });
    this.catalogQueue = run.catch(() => undefined);
    await run;
  }

  async close(): Promise<void> {
    await this.pool.end().catch(() => undefined);
    await this.catalogClient?.end().catch(() => undefined);
  }

  private async client(): Promise<Client> {
    if (!this.catalogClient) {
      const client = new Client({ connectionString: this.url, options: SESSION_OPTIONS });
      client.on('error', () => {
        if (this.catalogClient === client) this.catalogClient = undefined;
      });
      client.on('end', () => {
        if (this.catalogClient === client) this.catalogClient = undefined;
      });
      await client.connect();
      this.catalogClient = client;
    }
    return this.catalogClient;
  }
}

/** One DatabaseHandle per database name, created on first use. */
export class DatabaseRegistry {
  private readonly handles = new Map<string, DatabaseHandle>();

  constructor(
    private readonly baseUrl: string,
    private readonly poolSize: number,
  ) {}

  get(database: string | undefined): DatabaseHandle {
    const key = database ?? '';
    let handle = this.handles.get(key);
    if (!handle) {
      if (this.handles.size >= MAX_DATABASES) this.evictOne();
      handle = new DatabaseHandle(this.urlFor(database), this.poolSize);
      this.handles.set(key, handle);
    }
    return handle;
  }

  /** Drops the handle of a database that turned out not to exist. */
  forget(database: string | undefined): void {
    const key = database ?? '';
    const handle = this.handles.get(key);
    this.handles.delete(key);
    void handle?.close();
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.handles.values()].map((h) => h.close()));
    this.handles.clear();
  }

  private urlFor(database: string | undefined): string {
    if (database === undefined) return this.baseUrl;
    const url = new URL(this.baseUrl);
    url.pathname = '/' + encodeURIComponent(database);
    return url.toString();
  }

  private evictOne(): void {
    const first = this.handles.keys().next();
    if (!first.done) this.forget(first.value || undefined);
  }
}
