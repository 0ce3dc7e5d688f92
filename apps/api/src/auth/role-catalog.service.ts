import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { Pool } from 'pg';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';

/** Whether statements can run as a role. */
export type RoleUsability = 'ok' | 'missing' | 'not-member';

/** Whether a role may reach a database. */
export type DatabaseAccess = 'ok' | 'no-database' | 'no-role' | 'no-connect';

const CACHE_MS = 5_000;
const CACHE_MAX = 10_000;

/**
 * Reads PostgreSQL's roles and database privileges over DATABASE_URL (the server statements run
 * on): whether a user's role exists and the authenticator may become it, and whether that role
 * has CONNECT on a database.
 */
@Injectable()
export class RoleCatalogService implements OnModuleDestroy {
  private pool: Pool | undefined;
  private readonly access = new Map<string, { value: DatabaseAccess; at: number }>();

  constructor(@Inject(SLUICE_CONFIG) private readonly config: SluiceConfig) {}

  /** The database of DATABASE_URL: where statements go when they name none. */
  get defaultDatabase(): string | undefined {
    if (!this.config.databaseUrl) return undefined;
    return decodeURIComponent(new URL(this.config.databaseUrl).pathname.slice(1)) || undefined;
  }

  async roleUsability(role: string): Promise<RoleUsability> {
    // SET ROLE needs the SET option from PostgreSQL 16 on; before, membership is enough.
    const { rows } = await this.db().query<{ exists: boolean; member: boolean | null }>(
      `SELECT r.oid IS NOT NULL AS exists,
              CASE WHEN r.oid IS NULL THEN false
                   WHEN current_setting('server_version_num')::int >= 160000
                     THEN pg_has_role(current_user, r.oid, 'SET')
                   ELSE pg_has_role(current_user, r.oid, 'MEMBER') END AS member
         FROM (SELECT 1) one LEFT JOIN pg_roles r ON r.rolname = $1`,
      [role],
    );
    if (!rows[0].exists) return 'missing';
    return rows[0].member ? 'ok' : 'not-member';
  }

  /** CONNECT privilege of a role on a database (cached a few seconds). */
  async databaseAccess(role: string, database: string): Promise<DatabaseAccess> {
    const key = `${role}\u0000${database}`;
    const hit = this.access.get(key);
    if (hit && Date.now() - hit.at < CACHE_MS) return hit.value;
    const { rows } = await this.db().query<{ db: boolean; role: boolean; connect: boolean }>(
      `SELECT d.oid IS NOT NULL AS db, r.oid IS NOT NULL AS role,
              COALESCE(CASE WHEN d.oid IS NOT NULL AND r.oid IS NOT NULL
                            THEN has_database_privilege(r.oid, d.oid, 'CONNECT') END, false)
                AS connect
         FROM (SELECT 1) one
         LEFT JOIN pg_database d ON d.datname = $2
         LEFT JOIN pg_roles r ON r.rolname = $1`,
      [role, database],
    );
    const row = rows[0];
    const value: DatabaseAccess = !row.db
      ? 'no-database'
      : !row.role
        ? 'no-role'
        : row.connect
          ? 'ok'
          : 'no-connect';
    if (this.access.size >= CACHE_MAX) this.access.clear();
    this.access.set(key, { value, at: Date.now() });
    return value;
  }

  async onModuleDestroy(): Promise<void> {
    await this.close();
  }

  async close(): Promise<void> {
    const pool = this.pool;
    this.pool = undefined;
    await pool?.end().catch(() => undefined);
  }

  private db(): Pool {
    if (!this.pool) {
      this.pool = new Pool({
        connectionString: this.config.databaseUrl,
        max: 2,
        idleTimeoutMillis: 30_000,
        application_name: 'sluice-auth',
      });
      this.pool.on('error', () => undefined);
    }
    return this.pool;
  }
}
