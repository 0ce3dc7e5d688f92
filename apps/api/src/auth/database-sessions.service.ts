import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { credentialSealKey, sealCredential } from '@app/access';
import { ConfigError, SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { MetadataSchema } from '@app/users';
import { METADATA_POOL } from '../infra/tokens';

const PURGE_MS = 60_000;
/** Slack for clocks and hand-over between the api that queued a job and the worker taking it. */
const MARGIN_SECONDS = 10;

/**
 * Sessions of database users (SLUICE_AUTH=database) in `sluice.db_sessions`. Each keeps the
 * user's password sealed (AES-256-GCM, key derived from SLUICE_CREDENTIAL_KEY, bound to the session
 * id and user name) so that a worker can log in as the user; the password is nowhere else. A
 * session lasts as long as its token, plus the longest a query may wait in the queue; logout
 * deletes it, and expired rows are deleted at every login and every minute.
 */
@Injectable()
export class DatabaseSessionsService implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger(DatabaseSessionsService.name);
  private key: Buffer | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    @Inject(METADATA_POOL) private readonly pool: Pool,
    private readonly schema: MetadataSchema,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
  ) {}

  async onModuleInit(): Promise<void> {
    if (this.config.authMode !== 'database') return;
    if (!this.config.credentialKey) {
      throw new ConfigError('SLUICE_CREDENTIAL_KEY', 'is required with SLUICE_AUTH=database');
    }
    this.key = credentialSealKey(this.config.credentialKey);
    await this.schema.ensure();
    this.timer = setInterval(() => void this.purge(), PURGE_MS);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
  }

  /**
   * Opens a session for a user whose password PostgreSQL just accepted; it ends `until` (s since
   * the epoch, the token's expiry) plus the queue wait. A single-use session (Basic auth) is taken
   * by the one job it was made for. Returns the session id.
   */
  async open(
    username: string,
    password: string,
    until: number,
    options: { singleUse?: boolean } = {},
  ): Promise<string> {
    if (!this.key) throw new Error('database sessions are off (SLUICE_AUTH is not database)');
    const sid = randomUUID();
    const sealed = sealCredential(this.key, password, { sessionId: sid, username });
    await this.pool.query(
      `WITH expired AS (DELETE FROM sluice.db_sessions WHERE expires_at < now())
       INSERT INTO sluice.db_sessions (sid, username, sealed, single_use, expires_at)
       VALUES ($1, $2, $3, $4, to_timestamp($5))`,
      [sid, username, sealed, options.singleUse ?? false, this.endOf(until)],
    );
    return sid;
  }

  /** True while the session exists, belongs to `username` and has not expired. */
  async isOpen(sid: string, username: string): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `SELECT 1 FROM sluice.db_sessions
        WHERE sid = $1 AND username = $2 AND expires_at > now()`,
      [sid, username],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Moves the end of an open session to `until` (a refreshed token's expiry); false if it ended. */
  async extend(sid: string, username: string, until: number): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `UPDATE sluice.db_sessions SET expires_at = to_timestamp($3)
        WHERE sid = $1 AND username = $2 AND expires_at > now()`,
      [sid, username, this.endOf(until)],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Ends a session: its sealed credential is deleted. */
  async close(sid: string): Promise<void> {
    await this.pool.query('DELETE FROM sluice.db_sessions WHERE sid = $1', [sid]);
  }

  private endOf(until: number): number {
    return until + Math.ceil(this.config.maxQueueWaitMs / 1000) + MARGIN_SECONDS;
  }

  private async purge(): Promise<void> {
    await this.pool
      .query('DELETE FROM sluice.db_sessions WHERE expires_at < now()')
      .catch((err: Error) => this.logger.warn(`cannot delete expired sessions: ${err.message}`));
  }
}
