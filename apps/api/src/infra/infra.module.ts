import {
  DynamicModule,
  Global,
  Inject,
  Module,
  OnApplicationBootstrap,
  OnApplicationShutdown,
  Provider,
} from '@nestjs/common';
import { Pool } from 'pg';
import { connectingWithin, ownLoginUrl } from '@app/access';
import { SLUICE_CONFIG, SluiceConfig, isStandalone } from '@app/config';
import { ExecutionModule, QueryLifecycle, QueryPoolService } from '@app/execution';
import {
  InProcessJobQueue,
  InProcessResultChannel,
  JobQueue,
  InProcessQueryRegistry,
  QueryRegistry,
  RedisClient,
  RedisConnector,
  RedisKeys,
  RedisQueryRegistry,
  RedisResultSink,
  RedisResultSource,
  ResultSink,
  ResultSource,
  ResultSpool,
  SharedKeptTotal,
  droppingSpooled,
  openSpool,
} from '@app/transport';
import { BullmqJobQueue } from '@app/queue';
import { StandaloneExecutionService } from '../standalone/standalone-execution.service';
import {
  DASHBOARD_QUEUE,
  JOB_QUEUE,
  METADATA_POOL,
  QUERY_REGISTRY,
  REDIS,
  RESULT_SINK,
  RESULT_SOURCE,
  RESULT_SPOOL,
} from './tokens';

/** The pool on the metadata database; `sluice users` of standalone mode makes it alone. */
export const metadataPool: Provider = {
  provide: METADATA_POOL,
  inject: [SLUICE_CONFIG],
  useFactory: (config: SluiceConfig) => {
    const pool = new Pool({
      // Never a user's function or operator in place of pg_catalog's: see ownLoginUrl.
      connectionString: config.metadataDatabaseUrl && ownLoginUrl(config.metadataDatabaseUrl),
      max: 4,
      Client: connectingWithin(config.pgConnectTimeoutMs),
    });
    // An idle connection that dies is replaced on the next query, whose failure is the one reported.
    pool.on('error', () => undefined);
    return pool;
  },
};

/** Cluster mode: BullMQ and Redis Streams, shared with any number of workers. */
const clusterProviders: Provider[] = [
  {
    provide: REDIS,
    inject: [SLUICE_CONFIG],
    useFactory: (config: SluiceConfig) => {
      // Fail fast while Redis is away (a clear 503) rather than hold requests until it is back.
      const redis = new RedisConnector(config.redis!).connect({
        maxRetriesPerRequest: 1,
        enableAutoPipelining: true,
      });
      // ioredis reconnects by itself; meanwhile requests get 503 and readiness says why.
      redis.on('error', () => undefined);
      return redis;
    },
  },
  {
    provide: BullmqJobQueue,
    inject: [SLUICE_CONFIG],
    useFactory: (config: SluiceConfig) =>
      new BullmqJobQueue(
        // Its own connection, as the shared one fails fast; no auto-pipelining (see the class).
        new RedisConnector(config.redis!).connect({ maxRetriesPerRequest: 1 }),
        new RedisKeys(config.keyPrefix),
        { seconds: config.jobRetentionSeconds, count: config.jobRetentionCount },
      ),
  },
  { provide: JOB_QUEUE, useExisting: BullmqJobQueue },
  // bull-board reads BullMQ itself: it gets the adapter's queues here, where the adapter is chosen.
  {
    provide: DASHBOARD_QUEUE,
    inject: [BullmqJobQueue],
    useFactory: (queue: BullmqJobQueue) => queue.queues,
  },
  {
    provide: QUERY_REGISTRY,
    inject: [SLUICE_CONFIG, REDIS],
    useFactory: (config: SluiceConfig, redis: RedisClient): QueryRegistry =>
      new RedisQueryRegistry(
        redis,
        new RedisKeys(config.keyPrefix),
        {
          seconds: config.jobRetentionSeconds,
          count: config.queryRetentionCount,
          keptCount: config.resultRetentionCount,
          trimEveryMs: config.retentionTrimIntervalMs,
        },
        config.slotLeaseMs,
      ),
  },
  {
    provide: RESULT_SOURCE,
    inject: [SLUICE_CONFIG, REDIS, RESULT_SPOOL],
    useFactory: (config: SluiceConfig, redis: RedisClient, spool: ResultSpool | null) =>
      droppingSpooled(
        new RedisResultSource(redis, new RedisKeys(config.keyPrefix), {
          connector: new RedisConnector(config.redis!),
          silenceMs: config.producerSilenceMs,
          ttlSeconds: config.streamTtlSeconds,
          beatMs: config.readerBeatMs,
        }),
        spool,
      ),
  },
  {
    provide: RESULT_SINK,
    inject: [SLUICE_CONFIG, REDIS],
    useFactory: (config: SluiceConfig, redis: RedisClient): ResultSink =>
      new RedisResultSink(
        redis,
        new RedisKeys(config.keyPrefix),
        config.streamTtlSeconds,
        config.readerBeatMs,
      ),
  },
];

/** Standalone mode: the same two ports, in memory, and the thread pool in this process. */
const standaloneProviders: Provider[] = [
  {
    provide: InProcessJobQueue,
    inject: [SLUICE_CONFIG],
    useFactory: (config: SluiceConfig) =>
      new InProcessJobQueue({
        seconds: config.jobRetentionSeconds,
        count: config.jobRetentionCount,
      }),
  },
  {
    provide: InProcessResultChannel,
    inject: [SLUICE_CONFIG, QueryPoolService],
    // The pool's threads take kept results' bytes from the total this channel gives them back to.
    useFactory: (config: SluiceConfig, pool: QueryPoolService) =>
      new InProcessResultChannel(
        config.producerSilenceMs,
        config.resultTtlSeconds,
        new SharedKeptTotal(pool.keptBytes),
      ),
  },
  {
    provide: QUERY_REGISTRY,
    inject: [SLUICE_CONFIG, InProcessResultChannel],
    useFactory: (config: SluiceConfig, results: InProcessResultChannel): QueryRegistry =>
      new InProcessQueryRegistry(
        {
          seconds: config.jobRetentionSeconds,
          count: config.queryRetentionCount,
          keptCount: config.resultRetentionCount,
        },
        // Nothing to wait for: the channel drops it in memory.
        (queryId) => void results.dropKept(queryId),
      ),
  },
  { provide: JOB_QUEUE, useExisting: InProcessJobQueue },
  {
    provide: RESULT_SOURCE,
    inject: [InProcessResultChannel, RESULT_SPOOL],
    useFactory: (channel: InProcessResultChannel, spool: ResultSpool | null) =>
      droppingSpooled(channel, spool),
  },
  { provide: RESULT_SINK, useExisting: InProcessResultChannel },
  { provide: REDIS, useValue: undefined },
  { provide: DASHBOARD_QUEUE, useValue: undefined },
  StandaloneExecutionService,
];

/** The spool of kept results, in both modes: null without one (kept results in Redis). */
const resultSpool: Provider = {
  provide: RESULT_SPOOL,
  inject: [SLUICE_CONFIG],
  useFactory: (config: SluiceConfig): ResultSpool | null =>
    config.spool ? openSpool(config.spool) : null,
};

/**
 * The process's writer of query states (in standalone mode its pool's too); the request log hears
 * each query's end from it.
 */
const queryLifecycle: Provider = {
  provide: QueryLifecycle,
  inject: [QUERY_REGISTRY],
  useFactory: (registry: QueryRegistry) => new QueryLifecycle(registry),
};

/** The api's connections: metadata PostgreSQL, the job queue, the result source and sink. */
@Global()
@Module({})
export class InfraModule implements OnApplicationBootstrap, OnApplicationShutdown {
  static forRoot(config: SluiceConfig): DynamicModule {
    const standalone = isStandalone(config);
    return {
      module: InfraModule,
      imports: standalone ? [ExecutionModule] : [],
      providers: [
        metadataPool,
        ...(standalone ? standaloneProviders : clusterProviders),
        queryLifecycle,
        resultSpool,
      ],
      exports: [
        RESULT_SPOOL,
        METADATA_POOL,
        REDIS,
        JOB_QUEUE,
        RESULT_SOURCE,
        RESULT_SINK,
        QUERY_REGISTRY,
        QueryLifecycle,
        DASHBOARD_QUEUE,
      ],
    };
  }

  constructor(
    @Inject(METADATA_POOL) private readonly pool: Pool,
    @Inject(REDIS) private readonly redis: RedisClient | undefined,
    @Inject(JOB_QUEUE) private readonly queue: JobQueue,
    @Inject(RESULT_SOURCE) private readonly source: ResultSource,
    @Inject(QUERY_REGISTRY) private readonly registry: QueryRegistry,
    @Inject(RESULT_SPOOL) private readonly spool: ResultSpool | null,
  ) {}

  /** The api keeps the registry's records within their retention, on a timer of its own. */
  onApplicationBootstrap(): void {
    this.registry.startTrimming();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.source.close();
    await this.queue.close();
    // The registry's trims stop, and one under way ends, before its connection does.
    await this.registry.close();
    // Shutdown: a connection already closed or down has nothing left to flush.
    await this.redis?.quit().catch(() => undefined);
    await this.pool.end().catch(() => undefined);
    this.spool?.close();
  }
}
