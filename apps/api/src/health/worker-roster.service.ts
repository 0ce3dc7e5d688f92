import { Inject, Injectable } from '@nestjs/common';
import type Redis from 'ioredis';
import { SLUICE_CONFIG, SluiceConfig, isStandalone } from '@app/config';
import { Lane } from '@app/contracts';
import { RedisKeys, readWorkerBeat } from '@app/transport';
import { REDIS } from '../infra/tokens';

/** A worker counts as alive while its last heartbeat is younger than this many beats. */
const BEATS_BEFORE_LOST = 3;

/** Which workers are alive: their heartbeats in Redis (cluster), or the in-process pool (standalone). */
@Injectable()
export class WorkerRosterService {
  private readonly keys: RedisKeys;

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    @Inject(REDIS) private readonly redis: Redis | undefined,
  ) {
    this.keys = new RedisKeys(config.keyPrefix);
  }

  /** How old a heartbeat may be (ms). */
  get staleAfterMs(): number {
    return this.config.workerHeartbeatMs * BEATS_BEFORE_LOST;
  }

  /**
   * Ids of the workers seen recently (serving `lane`, if named); standalone mode has one, in this
   * process, serving every lane.
   */
  async alive(lane?: Lane): Promise<string[]> {
    if (isStandalone(this.config) || !this.redis) return ['in-process'];
    const beats = await this.redis.hgetall(this.keys.workers);
    const now = Date.now();
    return Object.entries(beats)
      .map(([id, value]) => ({ id, beat: readWorkerBeat(value) }))
      .filter(({ beat }) => now - beat.at <= this.staleAfterMs)
      .filter(({ beat }) => lane === undefined || beat.lanes.includes(lane))
      .map(({ id }) => id);
  }
}
