import type { RedisClient } from './redis.connector';
import { ResultRecord } from '@app/contracts';
import { ResultSink } from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { recordFields } from './stream.codec';

/** The producer side of every query's Redis stream, over one shared connection. */
export class RedisResultSink implements ResultSink {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly ttlSeconds: number,
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
}
