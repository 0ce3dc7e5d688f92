import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { Pool } from 'pg';
import { METADATA_POOL } from './users.tokens';
import {
  MetadataEvent,
  MetadataEventListener,
  MetadataEventsService,
} from './metadata-events.service';
import { MetadataSchema } from './metadata.schema';
import { DUMMY_HASH, verifyPassword } from './password.hasher';

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
  private readonly cache = new Map<string, { user: UserRecord | undefined; at: number }>();

  constructor(
    @Inject(METADATA_POOL) private readonly pool: Pool,
    private readonly schema: MetadataSchema,
    private readonly events: MetadataEventsService,
  ) {}

  async onModuleInit(): Promise<void> {
    this.events.subscribe(this);
    await this.schema.ensure();
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
}
