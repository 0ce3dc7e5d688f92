import { Inject, Injectable, Logger } from '@nestjs/common';
import { Client } from 'pg';
import { loginUrl } from '@app/access';
import { SluiceError } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';

/**
 * A login PostgreSQL accepted: the role's id, `pg-role:<oid>`, which a role dropped and created
 * again under the name does not have (so it owns nothing of the first one's queries).
 */
export interface DatabaseRole {
  roleId: string;
}

/** What PostgreSQL answered a login: accepted, refused, or accepted for a database it lacks. */
export type DatabaseLoginResult = DatabaseRole | 'refused' | 'no-database' | 'no-connect';

const CONNECT_TIMEOUT_MS = 5_000;

/**
 * Database users (SLUICE_AUTH=database): a login is checked by logging in to the PostgreSQL server
 * of DATABASE_URL as the user, so that its password (SCRAM), pg_hba.conf, VALID UNTIL and NOLOGIN
 * all decide. PostgreSQL answers a missing role and a wrong password alike; so does this.
 */
@Injectable()
export class DatabaseLoginService {
  private readonly logger = new Logger(DatabaseLoginService.name);

  constructor(@Inject(SLUICE_CONFIG) private readonly config: SluiceConfig) {}

  /** Throws DB_UNAVAILABLE when the server cannot be asked. */
  async check(
    user: string,
    password: string,
    database: string | undefined,
  ): Promise<DatabaseLoginResult> {
    // pg takes an empty password as "none" and would look in PGPASSWORD and ~/.pgpass instead.
    if (password === '') return 'refused';
    const client = new Client({
      connectionString: loginUrl(this.config.databaseUrl!, database, { user, password }),
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      application_name: 'sluice-login',
    });
    // Its failures reach connect() below; unheard, an 'error' event would crash the process.
    client.on('error', () => undefined);
    try {
      await client.connect();
      const { rows } = await client.query<{ oid: string }>(
        'SELECT oid::text AS oid FROM pg_roles WHERE rolname = session_user',
      );
      return { roleId: `pg-role:${rows[0].oid}` };
    } catch (err) {
      return this.refusal(err);
    } finally {
      // The check is over either way: a connection that never opened has nothing to close.
      await client.end().catch(() => undefined);
    }
  }

  private refusal(err: unknown): DatabaseLoginResult {
    switch ((err as { code?: unknown }).code) {
      // Wrong password, expired password, missing role, NOLOGIN, no pg_hba.conf entry.
      case '28P01':
      case '28000':
        return 'refused';
      // PostgreSQL authenticates before it looks for the database: the login was right.
      case '3D000':
        return 'no-database';
      case '42501':
        return 'no-connect';
    }
    this.logger.warn(`cannot check a database login: ${(err as Error).message}`);
    throw new SluiceError('DB_UNAVAILABLE', 'the database cannot check logins now');
  }
}
