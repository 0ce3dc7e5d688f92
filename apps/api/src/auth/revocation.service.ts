import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type { Pool } from 'pg';
import {
  METADATA_EVENTS_CHANNEL,
  MetadataEvent,
  MetadataEventListener,
  MetadataEventsService,
  MetadataSchema,
} from '@app/users';
import { METADATA_POOL } from '../infra/tokens';

const PRUNE_MS = 60_000;
const PURGE_EVERY = 10;
/** At most one re-read of the table per this many ms, however many notifications arrive. */
const RELOAD_GAP_MS = 100;
/**
 * A hint's re-read takes the rows revoked since the last read began, less this much (ms, by the
 * database's clock): a revocation committed late, after a read that began later than it.
 */
const RELOAD_OVERLAP_MS = 10_000;
/** Revocations held in memory at most; beyond it, checks ask the database. */
export const REVOKED_CACHE_MAX = 50_000;

/**
 * Revoked token ids (jti) in `sluice.revoked_tokens`, kept until the token would have expired
 * anyway. Each process holds the unexpired ones in memory (at most `REVOKED_CACHE_MAX`), so a
 * check costs no query; while events are not live, or the table holds more, it asks the database.
 * A 'revoked' notification is only a hint to re-read the table: anyone who can connect to the
 * metadata database can send one, so nothing in it is believed.
 */
@Injectable()
export class RevocationService implements OnModuleInit, OnModuleDestroy, MetadataEventListener {
  private readonly logger = new Logger(RevocationService.name);
  /** jti → expiry (ms). */
  private readonly revoked = new Map<string, number>();
  /** The map holds every unexpired row of the table (none left out for `REVOKED_CACHE_MAX`). */
  private complete = false;
  private loaded = false;
  private generation = 0;
  private ticks = 0;
  private timer: NodeJS.Timeout | undefined;
  private scheduled: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private rerun = false;
  private lastReload = 0;
  /** When the last whole or partial read began, by the database's clock (ms); none yet: 0. */
  private readFrom = 0;
  private stopped = false;

  constructor(
    @Inject(METADATA_POOL) private readonly pool: Pool,
    private readonly schema: MetadataSchema,
    private readonly events: MetadataEventsService,
  ) {}

  /** Revocations held in memory now (never more than `REVOKED_CACHE_MAX`). */
  get cached(): number {
    return this.revoked.size;
  }

  async onModuleInit(): Promise<void> {
    this.events.subscribe(this);
    await this.schema.ensure();
    await this.purge();
    await this.load(++this.generation);
    this.timer = setInterval(() => void this.prune(), PRUNE_MS);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.scheduled);
  }

  onMetadataEvent(event: MetadataEvent): void {
    if (event.kind === 'revoked') this.reloadSoon();
  }

  onMetadataResync(): void {
    // Events may have been missed: until a full read, checks go to the database.
    this.loaded = false;
    this.generation++;
    this.reloadSoon();
  }

  async isRevoked(jti: string): Promise<boolean> {
    if (this.revoked.has(jti)) return true;
    if (this.events.live && this.loaded && this.complete) return false;
    const { rowCount } = await this.pool.query(
      'SELECT 1 FROM sluice.revoked_tokens WHERE jti = $1',
      [jti],
    );
    return (rowCount ?? 0) > 0;
  }

  /**
   * Revokes a token on every api process; `expiresAt` in ms. True when this call revoked it,
   * false when it was revoked already (by this process or another).
   */
  async revoke(jti: string, expiresAt: number, username: string): Promise<boolean> {
    const event: MetadataEvent = { kind: 'revoked' };
    // One statement: the notification goes out when the row is committed.
    const { rowCount } = await this.pool.query(
      `WITH added AS (
         INSERT INTO sluice.revoked_tokens (jti, username, expires_at)
         VALUES ($1, $2, to_timestamp($3::double precision / 1000))
         ON CONFLICT (jti) DO NOTHING RETURNING jti)
       SELECT pg_notify($4, $5) FROM added`,
      [jti, username, expiresAt, METADATA_EVENTS_CHANNEL, JSON.stringify(event)],
    );
    this.remember(jti, expiresAt);
    return (rowCount ?? 0) > 0;
  }

  private remember(jti: string, exp: number): void {
    if (this.revoked.size >= REVOKED_CACHE_MAX && !this.revoked.has(jti)) {
      this.complete = false;
      return;
    }
    // Until the token's own (signed) expiry: capped at SLUICE_JWT_TTL_SECONDS, a signed-out admin
    // cookie (SLUICE_ADMIN_SESSION_SECONDS, which may be longer) was forgotten and worked again.
    this.revoked.set(jti, exp);
  }

  /** One re-read of the table for any number of hints: at most one running, one per gap. */
  private reloadSoon(): void {
    if (this.stopped) return;
    if (this.running) {
      this.rerun = true;
      return;
    }
    if (this.scheduled) return;
    const wait = Math.max(0, this.lastReload + RELOAD_GAP_MS - Date.now());
    this.scheduled = setTimeout(() => {
      this.scheduled = undefined;
      this.lastReload = Date.now();
      this.running = this.load(this.generation).finally(() => {
        this.running = undefined;
        if (!this.rerun) return;
        this.rerun = false;
        this.reloadSoon();
      });
    }, wait);
    this.scheduled.unref();
  }

  /**
   * Reads every unexpired revocation (`REVOKED_CACHE_MAX` at most) — or, for a hint while the
   * memory is whole, only those revoked since the last read began, so that a flood of hints
   * costs a read of a few rows each time, not of the whole table. Checks trust the memory only
   * once a read started after the last resync has completed.
   */
  private async load(generation: number): Promise<void> {
    try {
      await this.schema.ensure();
      const whole = !this.loaded || !this.complete || this.readFrom === 0;
      const since = whole ? '-infinity' : new Date(this.readFrom - RELOAD_OVERLAP_MS).toISOString();
      const { rows } = await this.pool.query<{ jti: string | null; exp: string; at: string }>(
        `SELECT r.jti, (extract(epoch FROM r.expires_at) * 1000)::bigint AS exp,
                (extract(epoch FROM now()) * 1000)::bigint AS at
           FROM (SELECT 1) AS one
           LEFT JOIN (SELECT jti, expires_at FROM sluice.revoked_tokens
                       WHERE expires_at > now() AND revoked_at >= $2::timestamptz LIMIT $1) r
             ON true`,
        [REVOKED_CACHE_MAX + 1, since],
      );
      const revoked = rows.filter((row) => row.jti !== null);
      if (whole) this.complete = revoked.length <= REVOKED_CACHE_MAX;
      for (const row of revoked) this.remember(row.jti!, Number(row.exp));
      this.readFrom = Number(rows[0].at);
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
