import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Pool } from 'pg';
import { METADATA_POOL } from './users.tokens';

const MIGRATION_LOCK = 0x5_1c1ce;

const MIGRATION = `
  CREATE SCHEMA IF NOT EXISTS sluice;
  CREATE TABLE IF NOT EXISTS sluice.users (
    username      text PRIMARY KEY,
    password_hash text NOT NULL,
    role          text NOT NULL,
    is_admin      boolean NOT NULL DEFAULT false,
    read_only     boolean NOT NULL DEFAULT false,
    enabled       boolean NOT NULL DEFAULT true,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
  );
  -- Tokens carry it: a new password (or a re-created user) ends every earlier session.
  ALTER TABLE sluice.users
    ADD COLUMN IF NOT EXISTS token_generation text NOT NULL DEFAULT gen_random_uuid()::text;
  -- One per user as created, kept for its life: what a user owns is tied to it, so a user
  -- re-created under the same name owns nothing of the one deleted.
  ALTER TABLE sluice.users
    ADD COLUMN IF NOT EXISTS user_id text NOT NULL DEFAULT gen_random_uuid()::text;
  CREATE TABLE IF NOT EXISTS sluice.revoked_tokens (
    jti        text PRIMARY KEY,
    username   text NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz NOT NULL DEFAULT now()
  );
  CREATE INDEX IF NOT EXISTS revoked_tokens_expires_at ON sluice.revoked_tokens (expires_at);
  -- A hint's re-read takes only the latest revocations (RevocationService).
  CREATE INDEX IF NOT EXISTS revoked_tokens_revoked_at ON sluice.revoked_tokens (revoked_at);
  -- Database users (SLUICE_AUTH=database): the password, sealed (AES-256-GCM), for the session's life.
  CREATE TABLE IF NOT EXISTS sluice.db_sessions (
    sid        text PRIMARY KEY,
    username   text NOT NULL,
    sealed     bytea NOT NULL,
    -- Basic auth: made for one request, taken by the job it runs.
    single_use boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
  );
  CREATE INDEX IF NOT EXISTS db_sessions_expires_at ON sluice.db_sessions (expires_at);
`;

/** Sluice's own tables in the metadata database (schema `sluice`), created once per process. */
@Injectable()
export class MetadataSchema {
  private readonly logger = new Logger(MetadataSchema.name);
  private ready: Promise<void> | undefined;

  constructor(@Inject(METADATA_POOL) private readonly pool: Pool) {}

  /** Resolves once the tables exist; every caller shares one migration. */
  ensure(): Promise<void> {
    this.ready ??= this.migrate().catch((err: unknown) => {
      this.ready = undefined;
      throw err;
    });
    return this.ready;
  }

  private async migrate(): Promise<void> {
    const client = await this.pool.connect();
    try {
      // Several api processes may start at once: one migrates, the others wait.
      await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
      await client.query(MIGRATION);
    } finally {
      const unlocked = await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).then(
        () => true,
        (err: Error) => {
          this.logger.warn(`cannot release the migration lock: ${err.message}`);
          return false;
        },
      );
      // A pooled session would keep the lock and stall every other process's start: end it.
      client.release(!unlocked);
    }
  }
}
