import { Inject, Injectable } from '@nestjs/common';
import { SLUICE_CONFIG, SluiceConfig, isStandalone } from '@app/config';
import { Lane, SluiceError } from '@app/contracts';
import { RedisClient, RedisKeys, readWorkerBeat } from '@app/transport';
import { REDIS } from '../infra/tokens';

/** A worker counts as alive while its last heartbeat is younger than this many beats. */
const BEATS_BEFORE_LOST = 3;
/** How long a reading of the heartbeats is used again by `serving` (beats come a second apart). */
const SERVING_TTL_MS = 250;

/** Which workers are alive: their heartbeats in Redis (cluster), or the in-process pool (standalone). */
@Injectable()
export class WorkerRosterService {
  private readonly keys: RedisKeys;
  /** The last read of the heartbeats, for callers that take one a little old (admission). */
  private lastRead?: { at: number; beats: Promise<Record<string, string>> };

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    @Inject(REDIS) private readonly redis: RedisClient | undefined,
  ) {
    this.keys = new RedisKeys(config.keyPrefix);
  }

  /** How old a heartbeat may be (ms). */
  get staleAfterMs(): number {
    return this.config.workerHeartbeatMs * BEATS_BEFORE_LOST;
  }

  /**
   * Ids of the workers seen recently (serving `lane`, if named); standalone mode has one, in this
   * process, serving every lane. `maxAgeMs`: a read of the heartbeats that old may be used again
   * (admission asks on every request; a beat comes every SLUICE_WORKER_HEARTBEAT_MS anyway).
   */
  async alive(lane?: Lane, maxAgeMs = 0): Promise<string[]> {
    if (isStandalone(this.config) || !this.redis) return ['in-process'];
    const beats = await this.read(this.redis, maxAgeMs);
    const now = Date.now();
    return Object.entries(beats)
      .map(([id, value]) => ({ id, beat: readWorkerBeat(value) }))
      .filter(({ beat }) => now - beat.at <= this.staleAfterMs)
      .filter(({ beat }) => lane === undefined || beat.lanes.includes(lane))
      .map(({ id }) => id);
  }

  /**
   * Whether a worker serving `lane` has beaten lately. Asked on every request (admission) and by
   * every quiet result: a reading SERVING_TTL_MS old is used again.
   */
  async serving(lane: Lane): Promise<boolean> {
    return (await this.alive(lane, SERVING_TTL_MS)).length > 0;
  }

  /** What a query of `lane` is told when no worker serves it: 503, retry after a heartbeat. */
  noWorker(lane: Lane): SluiceError {
    return new SluiceError(
      'UNAVAILABLE',
      `no worker is available to run the query in the ${lane} lane (none seen in the last ${this.staleAfterMs} ms); retry later`,
      undefined,
      this.retryAfter(),
    );
  }

  /** When to try again after a 503: about when a new worker's first heartbeat would show. */
  retryAfter(): Record<string, string> {
    return { 'Retry-After': String(Math.ceil(this.config.workerHeartbeatMs / 1000)) };
  }

  private read(redis: RedisClient, maxAgeMs: number): Promise<Record<string, string>> {
    const now = Date.now();
    if (maxAgeMs > 0 && this.lastRead && now - this.lastRead.at < maxAgeMs) {
      return this.lastRead.beats;
    }
    const beats = redis.hgetall(this.keys.workers);
    this.lastRead = { at: now, beats };
    // A failed read is not used again.
    beats.catch(() => {
      if (this.lastRead?.beats === beats) this.lastRead = undefined;
    });
    return beats;
  }
}
