import { Inject, Injectable, Logger } from '@nestjs/common';
import { Client, Pool } from 'pg';
import { loginUrl, ownLoginUrl, passwordChecked, watchPasswordRequest } from '@app/access';
import { SluiceError } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { RoleCatalogService } from '@app/users';
import { METADATA_POOL } from '../infra/tokens';

/**
 * A login PostgreSQL accepted: the role's id, `pg-role:<oid>`, which a role dropped and created
 * again under the name does not have (so it owns nothing of the first one's queries).
 */
export interface DatabaseRole {
  roleId: string;
}

/**
 * What PostgreSQL answered a login: accepted; refused; let in without checking the password
 * (`unverified`: pg_hba.conf trusts the connection); accepted for a database it lacks or may not
 * connect to; or accepted for a role no database user may be (`privileged`, with the reason).
 */
export type DatabaseLoginResult =
  DatabaseRole | 'refused' | 'unverified' | 'no-database' | 'no-connect' | { privileged: string };

const CONNECT_TIMEOUT_MS = 5_000;

/**
 * Database users (SLUICE_AUTH=database): a login is checked by logging in to the PostgreSQL server
 * of DATABASE_URL as the user, so that its password (SCRAM), pg_hba.conf, VALID UNTIL and NOLOGIN
 * all decide. PostgreSQL answers a missing role and a wrong password alike; so does this. A login
 * counts only if PostgreSQL asked for the password: a server that trusts the connection lets any
 * name in with any password. Superusers, Sluice's own logins and roles that reach the server's
 * files are no database users unless SLUICE_ALLOW_PRIVILEGED_DATABASE_USERS says so.
 */
@Injectable()
export class DatabaseLoginService {
  private readonly logger = new Logger(DatabaseLoginService.name);
  private metadataLogin: Promise<string> | undefined;

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    @Inject(METADATA_POOL) private readonly metadata: Pool,
    private readonly roles: RoleCatalogService,
  ) {}

  /** Throws DB_UNAVAILABLE when the server cannot be asked. */
  async check(
    user: string,
    password: string,
    database: string | undefined,
  ): Promise<DatabaseLoginResult> {
    // pg takes an empty password as "none" and would look in PGPASSWORD and ~/.pgpass instead.
    if (password === '') return 'refused';
    const client = new Client({
      // Its own search_path, over any the role stores: the queries below read pg_catalog's.
      connectionString: ownLoginUrl(
        loginUrl(this.config.databaseUrl!, database, { user, password }),
      ),
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      application_name: 'sluice-login',
    });
    // Its failures reach connect() below; unheard, an 'error' event would crash the process.
    client.on('error', () => undefined);
    const asked = watchPasswordRequest(client);
    let roleOid: number;
    try {
      await client.connect();
      if (!asked()) return this.unverified(user);
      const { rows } = await client.query<{ oid: number; version: number }>(
        `SELECT r.oid::int AS oid, pg_catalog.current_setting('server_version_num')::int AS version
           FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) session_user`,
      );
      roleOid = rows[0].oid;
      // PostgreSQL 16 on says how it authenticated the session: a second check of the first.
      if (rows[0].version >= 160000) {
        const { rows: auth } = await client.query<{ by: string | null }>(
          'SELECT system_user AS by',
        );
        if (!passwordChecked(auth[0].by)) return this.unverified(user);
      }
    } catch (err) {
      return this.refusal(err, { asked: asked(), user });
    } finally {
      // The check is over either way: a connection that never opened has nothing to close.
      await client.end().catch(() => undefined);
    }
    if (!this.config.allowPrivilegedDatabaseUsers) {
      const why = await this.privilegeOf(roleOid);
      if (why !== undefined) return { privileged: why };
    }
    return { roleId: `pg-role:${roleOid}` };
  }

  private async privilegeOf(roleOid: number): Promise<string | undefined> {
    try {
      this.metadataLogin ??= this.metadata
        .query<{ login: string }>('SELECT current_user AS login')
        .then(({ rows }) => rows[0].login);
      return await this.roles.privilegeOf(roleOid, await this.metadataLogin);
    } catch (err) {
      this.metadataLogin = undefined;
      this.logger.warn(`cannot read the rights of a database login: ${(err as Error).message}`);
      throw new SluiceError('DB_UNAVAILABLE', 'the database cannot check logins now');
    }
  }

  private unverified(user: string): 'unverified' {
    this.logger.warn(
      `refused the login of "${user}": PostgreSQL let it in without asking for a password ` +
        '(pg_hba.conf trusts the connection); database users need password authentication',
    );
    return 'unverified';
  }

  private refusal(
    err: unknown,
    { asked, user }: { asked: boolean; user: string },
  ): DatabaseLoginResult {
    switch ((err as { code?: unknown }).code) {
      // Wrong password, expired password, missing role, NOLOGIN, no pg_hba.conf entry.
      case '28P01':
      case '28000':
        return 'refused';
      // PostgreSQL authenticates before it looks for the database: the login was right, if
      // PostgreSQL checked it at all.
      case '3D000':
        return asked ? 'no-database' : this.unverified(user);
      case '42501':
        return asked ? 'no-connect' : this.unverified(user);
    }
    this.logger.warn(`cannot check a database login: ${(err as Error).message}`);
    throw new SluiceError('DB_UNAVAILABLE', 'the database cannot check logins now');
  }
}
