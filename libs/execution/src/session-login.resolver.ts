import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { Pool } from 'pg';
import {
  PgLogin,
  connectingWithin,
  credentialSealKey,
  openCredential,
  ownLoginUrl,
} from '@app/access';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { ExecuteJobData, Status, statusOf } from '@app/contracts';

/** What a job runs as: a database user's login (none: a service user), or why it may not run. */
export type JobLogin =
  { login?: PgLogin; refused?: undefined } | { login?: undefined; refused: Status };

const sessionEnded = () => statusOf('TOKEN_REVOKED', 'the session of this query ended');

/**
 * Turns a job's session (database users, SLUICE_AUTH=database) into the user's own PostgreSQL
 * login, on the main thread of whatever runs jobs: reads the sealed credential from
 * `sluice.db_sessions` in the metadata database and opens it. A session that ended (logout,
 * expiry) refuses the job. The password only ever goes to the pool thread, with the task.
 */
@Injectable()
export class SessionLoginResolver implements OnApplicationShutdown {
  private readonly logger = new Logger(SessionLoginResolver.name);
  private pool: Pool | undefined;
  private key: Buffer | undefined;

  constructor(@Inject(SLUICE_CONFIG) private readonly config: SluiceConfig) {}

  async resolve(job: ExecuteJobData): Promise<JobLogin> {
    const sid = job.session;
    if (sid === undefined) return {};
    let row: { username: string; sealed: Buffer } | undefined;
    try {
      row = await this.take(sid);
    } catch (err) {
      this.logger.error(`query ${job.queryId}: cannot read its session: ${(err as Error).message}`);
      return { refused: statusOf('DB_UNAVAILABLE', 'cannot read the session of this query') };
    }
    if (!row || row.username !== job.username) return { refused: sessionEnded() };
    try {
      const context = { sessionId: sid, username: row.username };
      const password = openCredential(this.sealKey(), row.sealed, context);
      const mayBePrivileged = this.config.allowPrivilegedDatabaseUsers;
      return { login: { user: row.username, password, checkOnUse: true, mayBePrivileged } };
    } catch (err) {
      // Sealed under another SLUICE_CREDENTIAL_KEY (or altered): the user must log in again.
      this.logger.warn(
        `query ${job.queryId}: the credential of its session does not open: ${(err as Error).message}`,
      );
      return { refused: sessionEnded() };
    }
  }

  /** Start-up check (database users only): the metadata database answers. */
  async check(): Promise<void> {
    if (this.config.authMode !== 'database') return;
    this.sealKey();
    await this.db().query('SELECT 1');
  }

  /** After the jobs drained (onModuleDestroy): a job that starts while they do still resolves. */
  async onApplicationShutdown(): Promise<void> {
    const pool = this.pool;
    this.pool = undefined;
    // Fails only when already ended; nothing is left to release then.
    await pool?.end().catch(() => undefined);
  }

  /** The session's row if it is open; a single-use one (Basic auth) is deleted as it is read. */
  private async take(sid: string): Promise<{ username: string; sealed: Buffer } | undefined> {
    const { rows } = await this.db().query<{ username: string; sealed: Buffer }>(
      `WITH found AS (
         SELECT sid, username, sealed, single_use FROM sluice.db_sessions
          WHERE sid = $1 AND expires_at > now()),
       taken AS (
         DELETE FROM sluice.db_sessions s USING found
          WHERE s.sid = found.sid AND found.single_use)
       SELECT username, sealed FROM found`,
      [sid],
    );
    return rows[0];
  }

  private sealKey(): Buffer {
    if (!this.config.credentialKey) {
      throw new Error('SLUICE_CREDENTIAL_KEY is not set: database users cannot run statements');
    }
    this.key ??= credentialSealKey(this.config.credentialKey);
    return this.key;
  }

  private db(): Pool {
    if (!this.pool) {
      this.pool = new Pool({
        // Never a user's function or operator in place of pg_catalog's: see ownLoginUrl.
        connectionString:
          this.config.metadataDatabaseUrl && ownLoginUrl(this.config.metadataDatabaseUrl),
        max: 4,
        idleTimeoutMillis: 30_000,
        application_name: 'sluice-sessions',
        Client: connectingWithin(this.config.pgConnectTimeoutMs),
      });
      // An idle connection that dies is replaced on the next use.
      this.pool.on('error', () => undefined);
    }
    return this.pool;
  }
}
