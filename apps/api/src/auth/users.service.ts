import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { Client, Pool } from 'pg';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { METADATA_POOL } from '../infra/tokens';
import { DUMMY_HASH, hashPassword, verifyPassword } from './password.hasher';

/** A row of sluice.users. */
export interface UserRecord {
  username: string;
  passwordHash: string;
  role: string;
  isAdmin: boolean;
  readOnly: boolean;
  enabled: boolean;
}

const MIGRATION_LOCK = 0x5_1c1ce;
const CACHE_MS = 5_000;

/** Users of the service, kept in the metadata database (schema `sluice`). */
@Injectable()
export class UsersService implements OnModuleInit {
  private readonly logger = new Logger(UsersService.name);
  private readonly cache = new Map<string, { user: UserRecord | undefined; at: number }>();

  constructor(
    @Inject(METADATA_POOL) private readonly pool: Pool,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.migrate();
    await this.bootstrapAdmin();
  }

  async find(username: string): Promise<UserRecord | undefined> {
    const hit = this.cache.get(username);
    if (hit && Date.now() - hit.at < CACHE_MS) return hit.user;
    const { rows } = await this.pool.query<UserRecord>(
      `SELECT username, password_hash AS "passwordHash", role, is_admin AS "isAdmin",
              read_only AS "readOnly", enabled
         FROM sluice.users WHERE username = $1`,
      [username],
    );
    const user = rows[0];
    this.cache.set(username, { user, at: Date.now() });
    return user;
  }

  /** The enabled user with this name and password, or undefined. */
  async authenticate(username: string, password: string): Promise<UserRecord | undefined> {
    const user = await this.find(username);
    const ok = await verifyPassword(password, user?.passwordHash ?? DUMMY_HASH);
    return ok && user?.enabled ? user : undefined;
  }

  private async migrate(): Promise<void> {
    const client = await this.pool.connect();
    try {
      // Several api processes may start at once: one migrates, the others wait.
      await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
      await client.query(`
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
        );`);
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
      client.release();
    }
  }

  private async bootstrapAdmin(): Promise<void> {
    const { adminUser, adminPassword } = this.config;
    if (!adminUser || adminPassword === undefined) return;
    const role = this.config.adminRole ?? (await this.databaseRole());
    const existing = await this.find(adminUser);
    if (
      existing &&
      (await verifyPassword(adminPassword, existing.passwordHash)) &&
      existing.role === role
    ) {
      return;
    }
    await this.pool.query(
      `INSERT INTO sluice.users (username, password_hash, role, is_admin)
       VALUES ($1, $2, $3, true)
       ON CONFLICT (username) DO UPDATE
         SET password_hash = EXCLUDED.password_hash, role = EXCLUDED.role, is_admin = true,
             enabled = true, updated_at = now()`,
      [adminUser, await hashPassword(adminPassword), role],
    );
    this.cache.delete(adminUser);
    this.logger.log(`admin user "${adminUser}" runs statements as role "${role}"`);
  }

  /** The login role of DATABASE_URL: the default role of the bootstrap admin. */
  private async databaseRole(): Promise<string> {
    const client = new Client({ connectionString: this.config.databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query<{ role: string }>('SELECT current_user AS role');
      return rows[0].role;
    } finally {
      await client.end();
    }
  }
}
