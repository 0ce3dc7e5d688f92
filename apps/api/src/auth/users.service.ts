import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { ConfigError, SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { METADATA_POOL } from '../infra/tokens';
import {
  MetadataEvent,
  MetadataEventListener,
  MetadataEventsService,
} from './metadata-events.service';
import { MetadataSchema } from './metadata.schema';
import { RoleCatalogService } from './role-catalog.service';
import { DUMMY_HASH, hashPassword, verifyPassword } from './password.hasher';

/** A row of sluice.users. */
export interface UserRecord {
  username: string;
  passwordHash: string;
  role: string;
  isAdmin: boolean;
  readOnly: boolean;
  enabled: boolean;
  /** Changes with the password: tokens of an older generation are refused. */
  tokenGeneration: string;
  /** Made when the user is created, never changed: a user re-created under the name has another. */
  userId: string;
}

const CACHE_MS = 5_000;
const CACHE_MAX = 10_000;

/** Columns of sluice.users as a UserRecord. */
export const USER_COLUMNS = `username, password_hash AS "passwordHash", role, is_admin AS "isAdmin",
  read_only AS "readOnly", enabled, token_generation AS "tokenGeneration", user_id AS "userId"`;

/**
 * Users of the service, kept in the metadata database (schema `sluice`). Lookups are cached a
 * few seconds; a change made by any process (or the CLI) drops the entry everywhere within moments
 * (at once on the process that made it; the others hear of it by NOTIFY).
 */
@Injectable()
export class UsersService implements OnModuleInit, MetadataEventListener {
  private readonly logger = new Logger(UsersService.name);
  private readonly cache = new Map<string, { user: UserRecord | undefined; at: number }>();

  constructor(
    @Inject(METADATA_POOL) private readonly pool: Pool,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    private readonly schema: MetadataSchema,
    private readonly events: MetadataEventsService,
    private readonly roles: RoleCatalogService,
  ) {}

  async onModuleInit(): Promise<void> {
    this.events.subscribe(this);
    await this.schema.ensure();
    await this.bootstrapAdmin();
  }

  onMetadataEvent(event: MetadataEvent): void {
    if (event.kind === 'user') this.cache.delete(event.username);
  }

  onMetadataResync(): void {
    this.cache.clear();
  }

  /** Drops a cached user (after a change made here). */
  forget(username: string): void {
    this.cache.delete(username);
  }

  async find(username: string): Promise<UserRecord | undefined> {
    const hit = this.cache.get(username);
    if (hit && Date.now() - hit.at < CACHE_MS) return hit.user;
    const { rows } = await this.pool.query<UserRecord>(
      `SELECT ${USER_COLUMNS} FROM sluice.users WHERE username = $1`,
      [username],
    );
    const user = rows[0];
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    this.cache.set(username, { user, at: Date.now() });
    return user;
  }

  /** The enabled user with this name and password, or undefined. */
  async authenticate(username: string, password: string): Promise<UserRecord | undefined> {
    const user = await this.find(username);
    const ok = await verifyPassword(password, user?.passwordHash ?? DUMMY_HASH);
    return ok && user?.enabled ? user : undefined;
  }

  private async bootstrapAdmin(): Promise<void> {
    const { adminUser, adminPassword } = this.config;
    if (!adminUser || adminPassword === undefined) return;
    if (this.config.authMode === 'database') {
      // Database users are PostgreSQL's roles: administrators are members of SLUICE_ADMIN_ROLE.
      this.logger.warn(
        'SLUICE_ADMIN_USER and SLUICE_ADMIN_PASSWORD are ignored with SLUICE_AUTH=database',
      );
      return;
    }
    const role = this.config.adminRole;
    // The control login may create roles: the admin's statements must never run as it.
    if (!role) throw new ConfigError('SLUICE_ADMIN_ROLE', 'is required with SLUICE_ADMIN_USER');
    await this.roles.provision(role);
    const existing = await this.find(adminUser);
    const samePassword =
      existing !== undefined && (await verifyPassword(adminPassword, existing.passwordHash));
    // The bootstrap admin is the way back in: start-up restores its password, role and rights.
    if (
      existing &&
      samePassword &&
      existing.role === role &&
      existing.isAdmin &&
      existing.enabled
    ) {
      return;
    }
    await this.pool.query(
      `INSERT INTO sluice.users (username, password_hash, role, is_admin, token_generation)
       VALUES ($1, $2, $3, true, $4)
       ON CONFLICT (username) DO UPDATE
         SET password_hash = EXCLUDED.password_hash, role = EXCLUDED.role, is_admin = true,
             enabled = true, token_generation = EXCLUDED.token_generation, updated_at = now()`,
      [
        adminUser,
        await hashPassword(adminPassword),
        role,
        samePassword ? existing.tokenGeneration : randomUUID(),
      ],
    );
    this.cache.delete(adminUser);
    // Best effort: other processes cache a user CACHE_MS at most.
    await this.events.publish({ kind: 'user', username: adminUser }).catch(() => undefined);
    this.logger.log(`admin user "${adminUser}" runs statements as role "${role}"`);
  }
}
