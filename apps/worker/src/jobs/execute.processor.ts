import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnModuleDestroy,
} from '@nestjs/common';
import { Job, QueueKeys, Worker } from 'bullmq';
import { ExecuteJobData, LANE_QUEUES, Lane } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig, defaultDatabase } from '@app/config';
import {
  ExecutionOutcome,
  JobLifecycle,
  JobRunner,
  QueryLifecycle,
  QueryPoolService,
  SessionLoginResolver,
  drainWithin,
} from '@app/execution';
import {
  OtherUsersWaiting,
  RedisClient,
  RedisConnector,
  RedisKeys,
  RedisQueryRegistry,
  RedisResultSink,
  ResultSink,
  UserSlots,
  retainedJobData,
} from '@app/transport';
import { userShareProcessor } from '@app/queue';
import { WorkerMetricsService } from '../metrics/worker-metrics.service';

/**
 * Takes execution jobs off the BullMQ queues of the lanes this worker serves (SLUICE_WORKER_LANES),
 * one BullMQ worker per lane, and runs each in its lane's thread pool. Each lane's BullMQ worker
 * takes only as many jobs as its pool runs at once, and leaves the rest to other workers; of them
 * one user's queries hold at most a share (SLUICE_WORKER_USER_SHARE_PERCENT).
 */
@Injectable()
export class ExecuteProcessor implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(ExecuteProcessor.name);
  private readonly keys: RedisKeys;
  private readonly connection: RedisClient;
  /** The registry's and the sink's: not BullMQ's, whose scripts make every pipeline on it slow. */
  private readonly commands: RedisClient;
  private readonly sink: ResultSink;
  private readonly lifecycle: JobLifecycle;
  private readonly runner: JobRunner;
  private readonly running = new Set<string>();
  private readonly workers = new Map<Lane, Worker<ExecuteJobData, ExecutionOutcome | undefined>>();

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    private readonly pool: QueryPoolService,
    private readonly logins: SessionLoginResolver,
    private readonly metrics: WorkerMetricsService,
  ) {
    this.keys = new RedisKeys(config.keyPrefix);
    // BullMQ workers need maxRetriesPerRequest null on their connection.
    const connector = new RedisConnector(config.redis!);
    this.connection = connector.connect({
      maxRetriesPerRequest: null,
    });
    // ioredis reconnects by itself; the BullMQ worker reports the errors ('error' handler below).
    this.connection.on('error', () => undefined);
    // ioredis copies every script defined on a connection (BullMQ defines ~50) into each pipeline
    // it builds; on a connection of their own, the registry's writes of one tick go together.
    this.commands = connector.connect({
      maxRetriesPerRequest: null,
      enableAutoPipelining: true,
    });
    // As above: ioredis reconnects by itself, and each command's failure reaches its caller.
    this.commands.on('error', () => undefined);
    this.sink = new RedisResultSink(
      this.commands,
      this.keys,
      config.streamTtlSeconds,
      config.readerBeatMs,
    );
    this.lifecycle = new JobLifecycle(
      new QueryLifecycle(
        new RedisQueryRegistry(
          this.commands,
          this.keys,
          { seconds: config.jobRetentionSeconds, count: config.queryRetentionCount },
          config.slotLeaseMs,
        ),
      ),
      this.sink,
    );
    this.runner = new JobRunner(this.lifecycle, {
      resolve: (job) => logins.resolve(job),
      tracing: {
        system: 'bullmq',
        settings: config.tracing,
        database: defaultDatabase(config),
      },
      logger: this.logger,
    });
  }

  async onApplicationBootstrap(): Promise<void> {
    await Promise.all([this.connection.ping(), this.commands.ping()]);
    await this.pool.check();
    await this.logins.check();
    const slots = new UserSlots(
      { interactive: this.pool.capacity('interactive'), export: this.pool.capacity('export') },
      this.config.workerUserSharePercent,
    );
    for (const lane of this.config.workerLanes) {
      const bull = new QueueKeys(this.keys.bullPrefix);
      const { wait, prioritized, delayed } = bull.getKeys(LANE_QUEUES[lane]);
      const waiting = new OtherUsersWaiting(this.commands, {
        wait,
        prioritized,
        delayed,
        jobPrefix: bull.toKey(LANE_QUEUES[lane], ''),
      });
      const worker = new Worker<ExecuteJobData, ExecutionOutcome | undefined>(
        LANE_QUEUES[lane],
        userShareProcessor(
          slots,
          lane,
          (job, taken) => this.run(job.data, taken).finally(() => this.keepSmall(job)),
          {
            onPutOff: () => this.metrics.putOff(lane),
            othersWaiting: (user) => waiting.check(user),
          },
        ),
        {
          connection: this.connection,
          prefix: this.keys.bullPrefix,
          concurrency: this.pool.capacity(lane),
          // A job whose worker died is failed, never handed to another worker: no statement runs twice.
          maxStalledCount: 0,
          stalledInterval: this.config.jobLockMs / 2,
          lockDuration: this.config.jobLockMs,
        },
      );
      worker.on('error', (err) => this.logger.error(`queue error (${lane}): ${err.message}`));
      this.workers.set(lane, worker);
    }
    await Promise.all([...this.workers.values()].map((worker) => worker.waitUntilReady()));
    const served = this.config.workerLanes.map(
      (lane) =>
        `the ${lane} lane (${LANE_QUEUES[lane]}) with ${this.pool.capacity(lane)} slots, ${slots.most[lane]} a user`,
    );
    this.logger.log(`consuming ${served.join(' and ')}`);
  }

  private async run(
    data: ExecuteJobData,
    taken: { takenBefore: boolean },
  ): Promise<ExecutionOutcome | undefined> {
    this.running.add(data.queryId);
    try {
      return await this.runner.run(
        data,
        (login, trace) => this.pool.run(data, { login, trace }),
        taken,
      );
    } finally {
      this.running.delete(data.queryId);
    }
  }

  /** Cuts a large statement's job before it is kept finished (see retainedJobData). */
  private async keepSmall(job: Job<ExecuteJobData>): Promise<void> {
    const kept = retainedJobData(job.data);
    if (!kept) return;
    await job.updateData(kept).catch((err: Error) => {
      // Kept whole then: the queue's count still bounds how many such jobs stay.
      this.logger.warn(`query ${job.data.queryId}: its job data was not cut: ${err.message}`);
    });
  }

  /** SIGTERM: take no new jobs, let running ones finish within the grace period, cancel the rest. */
  async onModuleDestroy(): Promise<void> {
    const closing = Promise.all([...this.workers.values()].map((worker) => worker.close()));
    await drainWithin(closing, this.config.shutdownGraceMs, async () => {
      if (this.running.size === 0) return;
      this.logger.warn(
        `cancelling ${this.running.size} queries still running after the grace period`,
      );
      await Promise.all([...this.running].map((id) => this.sink.cancel(id)));
    });
    this.lifecycle.close();
    // Shutdown: a connection already closed or down has nothing left to flush.
    await this.connection.quit().catch(() => undefined);
    await this.commands.quit().catch(() => undefined);
  }
}
