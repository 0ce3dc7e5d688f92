import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnModuleDestroy,
} from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { RedisClient, RedisKeys, readWorkerBeat, workerBeat } from '@app/transport';
import { OPS_REDIS } from './ops.tokens';

/** Heartbeats older than this are someone else's leftovers: removed when a worker starts (ms). */
const FORGET_AFTER_MS = 3_600_000;

/**
 * Tells every api that this worker is alive, and for which lanes: HSET of its id and a beat
 * (`workerBeat`: the time in ms and SLUICE_WORKER_LANES) in the workers hash, every
 * SLUICE_WORKER_HEARTBEAT_MS; removed on shutdown, so that readiness drops at once.
 */
@Injectable()
export class HeartbeatService implements OnApplicationBootstrap, OnModuleDestroy {
  readonly id = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private readonly logger = new Logger(HeartbeatService.name);
  private readonly keys: RedisKeys;
  private timer: NodeJS.Timeout | undefined;
  private lastBeat = 0;
  private failing = false;
  /** The beat being written, if any. */
  private beating: Promise<void> | undefined;
  /** Set on shutdown: no beat is written after the one that removes it. */
  private stopped = false;

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    @Inject(OPS_REDIS) private readonly redis: RedisClient,
  ) {
    this.keys = new RedisKeys(config.keyPrefix);
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.forgetStale();
    await this.beat();
    if (this.stopped) return;
    this.timer = setInterval(() => void this.beat(), this.config.workerHeartbeatMs);
    this.timer.unref();
  }

  /** When the last heartbeat was written (epoch ms; 0: never). */
  get lastBeatAt(): number {
    return this.lastBeat;
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.timer = undefined;
    // A SIGTERM during start-up may come while the first beat is on its way: removed after it.
    await this.beating;
    // Best effort: a beat left behind goes stale after three intervals, and the apis drop it.
    await this.redis.hdel(this.keys.workers, this.id).catch(() => undefined);
  }

  private beat(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.beating ??= this.write().finally(() => (this.beating = undefined));
    return this.beating;
  }

  private async write(): Promise<void> {
    try {
      const now = Date.now();
      await this.redis.hset(this.keys.workers, this.id, workerBeat(now, this.config.workerLanes));
      this.lastBeat = now;
      if (this.failing) this.logger.log('heartbeat written again');
      this.failing = false;
    } catch (err) {
      if (!this.failing) this.logger.warn(`heartbeat failed: ${(err as Error).message}`);
      this.failing = true;
    }
  }

  /** Tidying only: the apis ignore stale beats, and a Redis that is away shows in the first beat. */
  private async forgetStale(): Promise<void> {
    const beats = await this.redis.hgetall(this.keys.workers).catch(() => ({}));
    const stale = Object.entries(beats)
      .filter(([, beat]) => Date.now() - readWorkerBeat(beat).at > FORGET_AFTER_MS)
      .map(([id]) => id);
    // Left for the next tidying: a stale beat is ignored by every api meanwhile.
    if (stale.length > 0) await this.redis.hdel(this.keys.workers, ...stale).catch(() => undefined);
  }
}
