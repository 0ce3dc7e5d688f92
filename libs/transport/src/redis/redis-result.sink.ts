import type { RedisClient } from './redis.connector';
import { ResultRecord } from '@app/contracts';
import { ResultSink } from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { ALIVE_REFRESH_MS } from './redis-result.source';
import { recordFields } from './stream.codec';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The producer side of every query's Redis stream, over one shared connection. */
export class RedisResultSink implements ResultSink {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly ttlSeconds: number,
    /** How often readers refresh their alive key, which lives three times as long. */
    private readonly aliveBeatMs = ALIVE_REFRESH_MS,
  ) {}

  async end(queryId: string, record: ResultRecord): Promise<void> {
    const key = this.keys.out(queryId);
    const result = await this.redis
      .multi()
      .xadd(key, '*', ...recordFields(record))
      .expire(key, this.ttlSeconds)
      .exec();
    for (const [err] of result ?? []) if (err) throw err;
  }

  async cancel(queryId: string): Promise<void> {
    await this.redis.set(this.keys.cancel(queryId), '1', 'EX', this.ttlSeconds);
  }

  async cancelAsked(queryId: string): Promise<boolean> {
    return (await this.redis.exists(this.keys.cancel(queryId))) > 0;
  }

  /**
   * A key whose reader missed a beat may be that of a dead api, in its last seconds: this waits
   * for the next beat or for the key to lapse (at most two beats), so that a job never starts
   * for a reader that is gone.
   */
  async readerGone(queryId: string): Promise<boolean> {
    const key = this.keys.alive(queryId);
    const life = this.aliveBeatMs * 3;
    for (;;) {
      const left = await this.redis.pttl(key);
      if (left === -2) return true;
      // A beat within the last beat and a half (or a key with no expiry): the reader is there.
      if (left === -1 || left >= life - this.aliveBeatMs * 1.5) return false;
      await sleep(Math.min(left + 10, this.aliveBeatMs / 4));
    }
  }
}
