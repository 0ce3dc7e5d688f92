import { Pool } from 'pg';
import {
  DEFAULT_CONNECT_TIMEOUT_MS,
  LoginRoleProvisioner,
  ProvisionedLogin,
  connectingWithin,
  loginUrl,
  ownLoginUrl,
  queryOnLiveSession,
} from '@app/access';
import { TYPE_INFO_SQL, TypeCatalog, rowToTypeInfo } from '@app/sql';
import { Backend, cancelBackend } from './backend.signal';
import { SESSION_OPTIONS } from './login.pools';

const MAX_DATABASES = 64;

/**
 * The control side of one database, over DATABASE_URL's own login (never a user's statement):
 * the type catalog, cancels, and provisioning login roles. Two connections at most, so that a
 * cancel never waits behind a catalog load.
 */
export class DatabaseHandle {
  readonly catalog = new TypeCatalog();
  private readonly pool: Pool;
  /** The type load under way or the last one done: the next one starts after it, never beside it. */
  private lastTypeLoad: Promise<unknown> = Promise.resolve();

  constructor(url: string, connectTimeoutMs = DEFAULT_CONNECT_TIMEOUT_MS) {
    this.pool = new Pool({
      // Never a user's function or operator in place of pg_catalog's: see ownLoginUrl.
      connectionString: ownLoginUrl(url, SESSION_OPTIONS),
      max: 2,
      idleTimeoutMillis: 30_000,
      application_name: 'sluice-control',
      Client: connectingWithin(connectTimeoutMs),
    });
    // An idle connection that dies is dropped by the pool; nothing was running on it.
    this.pool.on('error', () => undefined);
  }

  /** Whether ensureTypes(oids) has nothing to load: no query would be asked. */
  typesKnown(oids: number[]): boolean {
    return (
      this.catalog.missing(oids).length === 0 && this.catalog.loadedComposites(oids).length === 0
    );
  }

  /**
   * Loads type info for the given OIDs (and what they refer to), one load at a time. Composite
   * types among them that were loaded before are loaded again: ALTER TABLE and ALTER TYPE change
   * their attributes under the same oid. Results without composites cost no query once loaded.
   */
  async ensureTypes(oids: number[]): Promise<void> {
    if (this.typesKnown(oids)) return;
    const run = this.lastTypeLoad.then(async () => {
      const stale = this.catalog.loadedComposites(oids);
      if (stale.length > 0) await this.load(stale);
      let missing = this.catalog.missing(oids);
      while (missing.length > 0) {
        await this.load(missing);
        const next = this.catalog.missing(oids);
        // Each round reaches new types (an array's element, a composite's attributes); a loaded
        // oid never comes back as missing (absent if it had no row), so a repeat means no progress.
        if (next.some((oid) => missing.includes(oid))) break;
        missing = next;
      }
    });
    // The caller gets the failure; the next load must not inherit it.
    this.lastTypeLoad = run.catch(() => undefined);
    await run;
  }

  private async load(oids: number[]): Promise<void> {
    const { rows } = await queryOnLiveSession<Record<string, unknown>>(this.pool, TYPE_INFO_SQL, [
      oids,
    ]);
    this.catalog.add(rows.map(rowToTypeInfo), oids);
  }

  /** Cancels what `backend` runs: PostgreSQL's own cancel request, by pid and secret key. */
  cancel(backend: Backend): Promise<void> {
    return cancelBackend(backend);
  }

  /**
   * Ends `backend`'s session (pg_terminate_backend, which the control login may as a member of
   * pg_signal_backend): for a statement that outlived its cancel, on a connection its worker
   * still holds — so the pid is still that backend's — and only while it is logged in as
   * `backend.user`. True if a signal was sent.
   */
  async terminate(backend: Backend): Promise<boolean> {
    const { rows } = await queryOnLiveSession<{ sent: boolean }>(
      this.pool,
      `SELECT pg_terminate_backend(pid) AS sent FROM pg_stat_activity
        WHERE pid = $1 AND usename = $2`,
      [backend.pid, backend.user],
    );
    return rows[0]?.sent === true;
  }

  /** Creates or repairs the login role of a user role (see LoginRoleProvisioner). */
  async provision(provisioner: LoginRoleProvisioner, role: string): Promise<ProvisionedLogin> {
    const client = await this.pool.connect();
    try {
      return await provisioner.provision(client, role, { resetPassword: true });
    } finally {
      client.release();
    }
  }

  /** Start-up check: the control login reaches the database. */
  async version(): Promise<string> {
    const { rows } = await queryOnLiveSession<{ v: string }>(this.pool, 'SELECT version() AS v');
    return rows[0].v;
  }

  async close(): Promise<void> {
    await this.pool.end().catch(() => undefined); // only fails when already ended
  }
}

/** One DatabaseHandle per database name, created on first use. */
export class DatabaseRegistry {
  private readonly handles = new Map<string, DatabaseHandle>();

  constructor(
    private readonly baseUrl: string,
    private readonly connectTimeoutMs = DEFAULT_CONNECT_TIMEOUT_MS,
  ) {}

  get(database: string | undefined): DatabaseHandle {
    const key = database ?? '';
    let handle = this.handles.get(key);
    if (!handle) {
      if (this.handles.size >= MAX_DATABASES) this.evictOne();
      handle = new DatabaseHandle(loginUrl(this.baseUrl, database), this.connectTimeoutMs);
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

  private evictOne(): void {
    const first = this.handles.keys().next();
    if (!first.done) this.forget(first.value || undefined);
  }
}
