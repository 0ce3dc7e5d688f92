import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { Pool } from 'pg';
import {
  LoginRoleProvisioner,
  LoginRoleSweep,
  LoginRoleSweeper,
  ProvisionedLogin,
  SERVER_FILE_ROLES,
  WRITE_ALL_ROLE,
  connectingWithin,
  ownLoginUrl,
  queryOnLiveSession,
  watchPasswordRequest,
} from '@app/access';
import { SLUICE_CONFIG, SluiceConfig, defaultDatabase } from '@app/config';

/** What the control login (DATABASE_URL) is allowed, as far as role isolation goes. */
export interface ControlLoginFacts {
  role: string;
  superuser: boolean;
  createrole: boolean;
  /** May cancel other logins' statements (pg_signal_backend, or superuser). */
  signal: boolean;
  version: number;
}

/**
 * The settings that bound what one statement may take of the server, shown for each user role
 * (GET /v1/users/{name}). Only temp_file_limit binds a user: a superuser sets it, and no user
 * may raise it; work_mem and statement_timeout any session may change.
 */
export const ROLE_LIMITS = ['temp_file_limit', 'work_mem', 'statement_timeout'] as const;

/** Whether a role may reach a database. */
export type DatabaseAccess = 'ok' | 'no-database' | 'no-role' | 'no-connect';

const CACHE_MS = 5_000;
const CACHE_MAX = 10_000;

/**
 * Reads PostgreSQL's roles and database privileges over DATABASE_URL (the control login of the
 * server statements run on), and keeps the login role of each user role (LoginRoleProvisioner).
 */
@Injectable()
export class RoleCatalogService implements OnModuleDestroy {
  private readonly logger = new Logger(RoleCatalogService.name);
  private readonly provisioner: LoginRoleProvisioner | undefined;
  private readonly sweeper: LoginRoleSweeper | undefined;
  private pool: Pool | undefined;
  private readonly access = new Map<string, { value: DatabaseAccess; at: number }>();
  private readonly members = new Map<string, { value: boolean; at: number }>();

  constructor(@Inject(SLUICE_CONFIG) private readonly config: SluiceConfig) {
    if (config.credentialKey) {
      this.provisioner = new LoginRoleProvisioner(config.credentialKey);
      this.sweeper = new LoginRoleSweeper(config.credentialKey);
    }
  }

  /** The database of DATABASE_URL: where statements go when they name none. */
  get defaultDatabase(): string | undefined {
    return defaultDatabase(this.config);
  }

  /**
   * Creates or repairs the login role statements of `role` run over; throws LoginRoleError when
   * the role cannot be given to a user (missing, the control login's own, or not grantable).
   * What makes a role reach beyond itself (superuser, CREATEROLE, BYPASSRLS) is logged loudly.
   * With `resetPassword`, the login role takes back its own password even when it exists.
   */
  async provision(
    role: string,
    options: { resetPassword?: boolean } = {},
  ): Promise<ProvisionedLogin> {
    if (!this.provisioner) throw new Error('SLUICE_CREDENTIAL_KEY is not set');
    const client = await this.db().connect();
    try {
      const done = await this.provisioner.provision(client, role, options);
      if (done.created) this.logger.log(`created login role "${done.login}" for role "${role}"`);
      for (const warning of done.warnings) this.logger.warn(`ROLE ISOLATION: ${warning}`);
      return done;
    } finally {
      client.release();
    }
  }

  /**
   * Drops the login roles made for `roles` under an earlier SLUICE_CREDENTIAL_KEY that no backend
   * uses (LoginRoleSweeper); says what it dropped and what it kept.
   */
  async sweepLoginRoles(roles: readonly string[]): Promise<LoginRoleSweep> {
    if (!this.sweeper) throw new Error('SLUICE_CREDENTIAL_KEY is not set');
    const client = await this.db().connect();
    try {
      return await this.sweeper.sweep(client, roles);
    } finally {
      client.release();
    }
  }

  /** The control login's own rights, for the start-up warnings. */
  async controlLogin(): Promise<ControlLoginFacts> {
    const { rows } = await queryOnLiveSession<ControlLoginFacts>(
      this.db(),
      `SELECT rolname AS role, rolsuper AS superuser, rolcreaterole AS createrole,
              rolsuper OR pg_has_role(current_user, 'pg_signal_backend', 'USAGE') AS signal,
              current_setting('server_version_num')::int AS version
         FROM pg_roles WHERE rolname = current_user`,
    );
    return rows[0];
  }

  /**
   * Whether PostgreSQL asked the control login (DATABASE_URL) for its password: a server whose
   * pg_hba.conf trusts Sluice's connections checks no database user's password either.
   */
  async controlPasswordAsked(): Promise<boolean> {
    const client = new (connectingWithin(this.config.pgConnectTimeoutMs))({
      connectionString: ownLoginUrl(this.config.databaseUrl!),
      application_name: 'sluice-auth',
    });
    // Its failures reach connect() below; unheard, an 'error' event would crash the process.
    client.on('error', () => undefined);
    const asked = watchPasswordRequest(client);
    try {
      await client.connect();
      return asked();
    } finally {
      // Closed either way: a connection that never opened has nothing to close.
      await client.end().catch(() => undefined);
    }
  }

  /**
   * Why the role of `roleOid` may not be a database user, or undefined: it is (or may become,
   * through a membership) a superuser, the control login, the metadata login `metadataLogin`, or
   * a member of a predefined role that reaches the server's files or programs, or writes every
   * table (WRITE_ALL_ROLE). Read over the
   * control login, out of the user's reach (its own session could shadow pg_roles).
   */
  async privilegeOf(roleOid: number, metadataLogin: string): Promise<string | undefined> {
    const { rows } = await queryOnLiveSession<{
      role: string;
      superuser: boolean;
      control: boolean;
      metadata: boolean;
      files: string[];
      writes_all: boolean;
    }>(
      this.db(),
      `SELECT r.rolname AS role,
              EXISTS (SELECT 1 FROM pg_roles s
                       WHERE s.rolsuper AND pg_has_role(r.oid, s.oid, 'MEMBER')) AS superuser,
              pg_has_role(r.oid, current_user, 'MEMBER') AS control,
              COALESCE((SELECT pg_has_role(r.oid, m.oid, 'MEMBER')
                          FROM pg_roles m WHERE m.rolname = $2), false) AS metadata,
              ARRAY(SELECT p::text FROM unnest($3::name[]) p
                     WHERE pg_has_role(r.oid, p, 'MEMBER')) AS files,
              EXISTS (SELECT 1 FROM pg_roles w
                       WHERE w.rolname = $4 AND pg_has_role(r.oid, w.oid, 'MEMBER')) AS writes_all
         FROM pg_roles r WHERE r.oid = $1`,
      [roleOid, metadataLogin, SERVER_FILE_ROLES, WRITE_ALL_ROLE],
    );
    const facts = rows[0];
    if (!facts) return 'the role no longer exists';
    if (facts.superuser) return `role "${facts.role}" is (or may become) a superuser`;
    if (facts.control) {
      return `role "${facts.role}" is (or may become) Sluice's control login (DATABASE_URL)`;
    }
    if (facts.metadata) {
      return (
        `role "${facts.role}" is (or may become) Sluice's metadata login ` +
        '(SLUICE_METADATA_DATABASE_URL)'
      );
    }
    if (facts.files.length > 0) {
      return (
        `role "${facts.role}" is a member of ${facts.files.join(', ')}, which reach the ` +
        "database server's files or programs"
      );
    }
    if (facts.writes_all) {
      return `role "${facts.role}" is a member of ${WRITE_ALL_ROLE}, which writes every table, Sluice's own users among them`;
    }
    return undefined;
  }

  /**
   * The login role statements of `role` run over, and the values of ROLE_LIMITS its sessions
   * start with in DATABASE_URL's database: what is stored on it (a superuser's
   * `ALTER ROLE … SET temp_file_limit`, which Sluice keeps), else the server's, as the control
   * login's sessions see it.
   */
  async limitsOf(role: string): Promise<{ login: string; limits: Record<string, string> }> {
    if (!this.provisioner) throw new Error('SLUICE_CREDENTIAL_KEY is not set');
    const login = this.provisioner.loginFor(role);
    const { rows } = await queryOnLiveSession<{ name: string; value: string }>(
      this.db(),
      `WITH stored AS (
         SELECT split_part(c, '=', 1) AS name, substr(c, strpos(c, '=') + 1) AS value,
                s.setdatabase
           FROM pg_db_role_setting s
           JOIN pg_roles l ON l.oid = s.setrole AND l.rolname = $1
           CROSS JOIN unnest(s.setconfig) c
          WHERE s.setdatabase IN (0, (SELECT oid FROM pg_database
                                      WHERE datname = current_database())))
       SELECT n AS name,
              COALESCE((SELECT value FROM stored WHERE stored.name = n
                         ORDER BY setdatabase DESC LIMIT 1), current_setting(n)) AS value
         FROM unnest($2::text[]) n`,
      [login, ROLE_LIMITS],
    );
    return { login, limits: Object.fromEntries(rows.map((r) => [r.name, r.value])) };
  }

  /** CONNECT privilege of a role on a database (cached a few seconds). */
  async databaseAccess(role: string, database: string): Promise<DatabaseAccess> {
    const key = `${role}\u0000${database}`;
    const hit = this.access.get(key);
    if (hit && Date.now() - hit.at < CACHE_MS) return hit.value;
    const { rows } = await queryOnLiveSession<{ db: boolean; role: boolean; connect: boolean }>(
      this.db(),
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

  /** Whether `role` is a member of `group` (pg_has_role MEMBER; cached a few seconds). */
  async isMember(role: string, group: string): Promise<boolean> {
    const key = `${role}\u0000${group}`;
    const hit = this.members.get(key);
    if (hit && Date.now() - hit.at < CACHE_MS) return hit.value;
    // Either role may be gone: that is "no", not an error.
    const { rows } = await queryOnLiveSession<{ member: boolean }>(
      this.db(),
      `SELECT COALESCE((SELECT pg_has_role(r.oid, g.oid, 'MEMBER')
                          FROM pg_roles r, pg_roles g
                         WHERE r.rolname = $1 AND g.rolname = $2), false) AS member`,
      [role, group],
    );
    const value = rows[0].member;
    if (this.members.size >= CACHE_MAX) this.members.clear();
    this.members.set(key, { value, at: Date.now() });
    return value;
  }

  async onModuleDestroy(): Promise<void> {
    await this.close();
  }

  async close(): Promise<void> {
    const pool = this.pool;
    this.pool = undefined;
    // Fails only when already ended.
    await pool?.end().catch(() => undefined);
  }

  private db(): Pool {
    if (!this.pool) {
      this.pool = new Pool({
        // Never a user's function or operator in place of pg_catalog's: see ownLoginUrl.
        connectionString: this.config.databaseUrl && ownLoginUrl(this.config.databaseUrl),
        max: 2,
        idleTimeoutMillis: 30_000,
        application_name: 'sluice-auth',
        Client: connectingWithin(this.config.pgConnectTimeoutMs),
      });
      // An idle connection that dies is replaced on the next use.
      this.pool.on('error', () => undefined);
    }
    return this.pool;
  }
}
