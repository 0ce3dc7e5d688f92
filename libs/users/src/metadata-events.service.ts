import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { Client, Pool } from 'pg';
import { connectingWithin, ownLoginUrl } from '@app/access';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { METADATA_POOL } from './users.tokens';

/**
 * A change to Sluice's own tables that every api process must learn about at once. Anyone who
 * can connect to the metadata database can send one: it is a hint to re-read the table, never
 * a fact in itself.
 */
export type MetadataEvent = { kind: 'revoked' } | { kind: 'user'; username: string };

/** Receives metadata events; `resync` when events may have been missed (reload everything). */
export interface MetadataEventListener {
  onMetadataEvent(event: MetadataEvent): void;
  onMetadataResync(): void;
}

/** The NOTIFY channel of metadata events. */
export const METADATA_EVENTS_CHANNEL = 'sluice_events';
const RETRY_MS = 1_000;

/** Anything that can run a query: the pool, or a client inside a transaction. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<unknown>;
}

/**
 * PostgreSQL LISTEN/NOTIFY on the metadata database: a logout or a user change on one api
 * process (or the CLI) reaches every other process within milliseconds, in cluster and
 * standalone mode alike, without a query per request. While the listening connection is down,
 * `live` is false and callers check the database instead of their caches.
 */
@Injectable()
export class MetadataEventsService implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger(MetadataEventsService.name);
  private readonly listeners = new Set<MetadataEventListener>();
  private client: Client | undefined;
  private retry: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    @Inject(METADATA_POOL) private readonly pool: Pool,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
  ) {}

  /** True while notifications are being received. */
  get live(): boolean {
    return this.client !== undefined;
  }

  subscribe(listener: MetadataEventListener): void {
    this.listeners.add(listener);
  }

  async onModuleInit(): Promise<void> {
    await this.connect();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    // Shutdown: a connection that already died has nothing left to close.
    await client?.end().catch(() => undefined);
  }

  /** Sends an event to every process; inside a transaction it is delivered on commit. */
  async publish(event: MetadataEvent, on: Queryable = this.pool): Promise<void> {
    await on.query('SELECT pg_notify($1, $2)', [METADATA_EVENTS_CHANNEL, JSON.stringify(event)]);
  }

  private async connect(): Promise<void> {
    const url = this.config.metadataDatabaseUrl;
    // Within SLUICE_PG_CONNECT_TIMEOUT_MS, as the pool's: a database that never answers is retried.
    const Connecting = connectingWithin(this.config.pgConnectTimeoutMs);
    const client: Client = new Connecting({ connectionString: url && ownLoginUrl(url) });
    client.on('error', () => this.lost(client));
    client.on('end', () => this.lost(client));
    client.on('notification', (message) => this.dispatch(message.payload));
    try {
      await client.connect();
      await client.query(`LISTEN ${METADATA_EVENTS_CHANNEL}`);
    } catch (err) {
      this.logger.warn(`cannot listen for metadata events: ${(err as Error).message}`);
      // The failure is logged above and retried below; a half-open connection is just dropped.
      await client.end().catch(() => undefined);
      this.scheduleRetry();
      return;
    }
    if (this.stopped) {
      // Shut down while connecting: nothing else will use this connection.
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    for (const listener of this.listeners) listener.onMetadataResync();
  }

  private lost(client: Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.logger.warn('metadata event connection lost; checking the database until it is back');
    this.scheduleRetry();
  }

  private scheduleRetry(): void {
    if (this.stopped) return;
    clearTimeout(this.retry);
    this.retry = setTimeout(() => void this.connect(), RETRY_MS);
    this.retry.unref();
  }

  private dispatch(payload: string | undefined): void {
    const event = parseEvent(payload);
    // Not ours: anyone connected to the metadata database may NOTIFY this channel.
    if (!event) return;
    for (const listener of this.listeners) listener.onMetadataEvent(event);
  }
}

/** The event a payload names, with nothing of it kept but its kind (and a user's name). */
function parseEvent(payload: string | undefined): MetadataEvent | undefined {
  let value: unknown;
  try {
    value = JSON.parse(payload ?? '');
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { kind, username } = value as Record<string, unknown>;
  if (kind === 'revoked') return { kind };
  if (kind === 'user' && typeof username === 'string') return { kind, username };
  return undefined;
}
