import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type { Pool } from 'pg';
import { METADATA_POOL } from '../infra/tokens';
import {
  METADATA_EVENTS_CHANNEL,
  MetadataEvent,
  MetadataEventListener,
  MetadataEventsService,
} from './metadata-events.service';
import { MetadataSchema } from './metadata.schema';

const PRUNE_MS = 60_000;
const PURGE_EVERY = 10;

/**
 * Revoked token ids (jti) in `sluice.revoked_tokens`, kept until the token would have expired
 * anyway. Each process holds the unexpired ones in memory, kept current by metadata events, so
 * a check costs no query; while events are not live it asks the database.
 */
@Injectable()
export class RevocationService implements OnModuleInit, OnModuleDestroy, MetadataEventListener {
  private readonly logger = new Logger(RevocationService.name);
  /** jti → expiry (ms). */
  private readonly revoked = new Map<string, number>();
  private loaded = false;
  private generation = 0;
  private ticks = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    @Inject(METADATA_POOL) private readonly pool: Pool,
    private readonly schema: MetadataSchema,
    private readonly events: MetadataEventsService,
  ) {}

  async onModuleInit(): Promise<void> {
    this.events.subscribe(this);
    await this.schema.ensure();
    await this.purge();
    await this.load();
    this.timer = setInterval(() => void this.prune(), PRUNE_MS);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
  }

  onMetadataEvent(event: MetadataEvent): void {
    if (event.kind === 'revoked' && typeof event.jti === 'string') {
      this.revoked.set(event.jti, Number(event.exp) || Date.now());
    }
  }

  onMetadataResync(): void {
    void this.load();
  }

  async isRevoked(jti: string): Promise<boolean> {
    if (this.revoked.has(jti)) return true;
    if (this.events.live && this.loaded) return false;
    const { rowCount } = await this.pool.query(
      'SELECT 1 FROM sluice.revoked_tokens WHERE jti = $1',
      [jti],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Revokes a token on every api process; `expiresAt` in ms. */
  async revoke(jti: string, expiresAt: number, username: string): Promise<void> {
    const event: MetadataEvent = { kind: 'revoked', jti, exp: expiresAt };
    // One statement: the notification goes out when the row is committed.
    await this.pool.query(
      `WITH added AS (
         INSERT INTO sluice.revoked_tokens (jti, username, expires_at)
         VALUES ($1, $2, to_timestamp($3::double precision / 1000))
         ON CONFLICT (jti) DO NOTHING RETURNING jti)
       SELECT pg_notify($4, $5) FROM added`,
      [jti, username, expiresAt, METADATA_EVENTS_CHANNEL, JSON.stringify(event)],
    );
    this.revoked.set(jti, expiresAt);
  }

  /** Reads every unexpired revocation; until it has, checks go to the database. */
  private async load(): Promise<void> {
    const generation = ++this.generation;
    this.loaded = false;
    try {
      await this.schema.ensure();
      const { rows } = await this.pool.query<{ jti: string; exp: string }>(
        `SELECT jti, (extract(epoch FROM expires_at) * 1000)::bigint AS exp
           FROM sluice.revoked_tokens WHERE expires_at > now()`,
      );
      for (const row of rows) this.revoked.set(row.jti, Number(row.exp));
      if (generation === this.generation) this.loaded = true;
    } catch (err) {
      this.logger.warn(`cannot load revoked tokens: ${(err as Error).message}`);
    }
  }

  private async prune(): Promise<void> {
    const now = Date.now();
    for (const [jti, exp] of this.revoked) if (exp < now) this.revoked.delete(jti);
    if (++this.ticks % PURGE_EVERY === 0) await this.purge();
  }

  /** Rows of tokens that have expired anyway are of no use. */
  private async purge(): Promise<void> {
    // Best effort: the next purge tries again, and expired rows are never read as revocations.
    await this.pool
      .query(`DELETE FROM sluice.revoked_tokens WHERE expires_at < now() - interval '1 minute'`)
      .catch(() => undefined);
  }
}
