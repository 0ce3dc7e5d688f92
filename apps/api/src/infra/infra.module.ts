import { Global, Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import Redis from 'ioredis';
import { Pool } from 'pg';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import {
  BullmqJobQueue,
  JobQueue,
  RedisKeys,
  RedisResultSource,
  ResultSource,
} from '@app/transport';
import { JOB_QUEUE, METADATA_POOL, REDIS, RESULT_SOURCE } from './tokens';

/** The api's connections: metadata PostgreSQL, Redis, the job queue and the result source. */
@Global()
@Module({
  providers: [
    {
      provide: METADATA_POOL,
      inject: [SLUICE_CONFIG],
      useFactory: (config: SluiceConfig) => {
        const pool = new Pool({ connectionString: config.metadataDatabaseUrl, max: 4 });
        pool.on('error', () => undefined);
        return pool;
      },
    },
    {
      provide: REDIS,
      inject: [SLUICE_CONFIG],
      useFactory: (config: SluiceConfig) => {
        const redis = new Redis(config.redisUrl!, { maxRetriesPerRequest: null, enableAutoPipelining: true });
        redis.on('error', () => undefined);
        return redis;
      },
    },
    {
      provide: JOB_QUEUE,
      inject: [SLUICE_CONFIG, REDIS],
      useFactory: (config: SluiceConfig, redis: Redis): JobQueue =>
        new BullmqJobQueue(redis, new RedisKeys(config.keyPrefix), config.jobRetentionSeconds),
    },
    {
      provide: RESULT_SOURCE,
      inject: [SLUICE_CONFIG, REDIS],
      useFactory: (config: SluiceConfig, redis: Redis): ResultSource =>
        new RedisResultSource(redis, new RedisKeys(config.keyPrefix), {
          redisUrl: config.redisUrl!,
          silenceMs: config.producerSilenceMs,
          ttlSeconds: config.streamTtlSeconds,
        }),
    },
  ],
  exports: [METADATA_POOL, REDIS, JOB_QUEUE, RESULT_SOURCE],
})
export class InfraModule implements OnApplicationShutdown {
  constructor(
    @Inject(METADATA_POOL) private readonly pool: Pool,
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(JOB_QUEUE) private readonly queue: JobQueue,
    @Inject(RESULT_SOURCE) private readonly source: ResultSource,
  ) {}

  async onApplicationShutdown(): Promise<void> {
    await this.source.close();
    await this.queue.close();
    await this.redis.quit().catch(() => undefined);
    await this.pool.end().catch(() => undefined);
  }
}
