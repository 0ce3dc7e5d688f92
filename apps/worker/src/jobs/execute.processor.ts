import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnModuleDestroy,
} from '@nestjs/common';
import { Job, Worker } from 'bullmq';
import Redis from 'ioredis';
import { EXECUTE_QUEUE, ExecuteJobData } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import {
  ExecutionOutcome,
  JobLifecycle,
  QueryLifecycle,
  QueryPoolService,
  SessionLoginResolver,
} from '@app/execution';
import { RedisKeys, RedisQueryRegistry, RedisResultSink, ResultSink } from '@app/transport';

/** Takes execution jobs off the BullMQ queue and runs each in the thread pool. */
@Injectable()
export class ExecuteProcessor implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(ExecuteProcessor.name);
  private readonly keys: RedisKeys;
  private readonly connection: Redis;
  private readonly sink: ResultSink;
  private readonly lifecycle: JobLifecycle;
  private readonly running = new Set<string>();
  private worker: Worker<ExecuteJobData, ExecutionOutcome | undefined> | undefined;

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    private readonly pool: QueryPoolService,
    private readonly logins: SessionLoginResolver,
  ) {
    this.keys = new RedisKeys(config.keyPrefix);
    // BullMQ workers need maxRetriesPerRequest null on their connection.
    this.connection = new Redis(config.redisUrl!, { maxRetriesPerRequest: null });
    // ioredis reconnects by itself; the BullMQ worker reports the errors ('error' handler below).
    this.connection.on('error', () => undefined);
    this.sink = new RedisResultSink(this.connection, this.keys, config.streamTtlSeconds);
    this.lifecycle = new JobLifecycle(
      new QueryLifecycle(
        new RedisQueryRegistry(this.connection, this.keys, config.jobRetentionSeconds),
      ),
      this.sink,
    );
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.connection.ping();
    await this.pool.check();
    await this.logins.check();
    this.worker = new Worker<ExecuteJobData, ExecutionOutcome | undefined>(
      EXECUTE_QUEUE,
      (job) => this.process(job),
      {
        connection: this.connection,
        prefix: this.keys.bullPrefix,
        concurrency: this.pool.capacity,
        // A job whose worker died is failed, never handed to another worker: no statement runs twice.
        maxStalledCount: 0,
        stalledInterval: 5_000,
        lockDuration: 10_000,
      },
    );
    this.worker.on('error', (err) => this.logger.error(`queue error: ${err.message}`));
    await this.worker.waitUntilReady();
    this.logger.log(`consuming queue "${EXECUTE_QUEUE}" with concurrency ${this.pool.capacity}`);
  }

  private async process(
    job: Job<ExecuteJobData, ExecutionOutcome | undefined>,
  ): Promise<ExecutionOutcome | undefined> {
    const data = job.data;
    if (!(await this.lifecycle.start(data))) return undefined;
    this.running.add(data.queryId);
    try {
      const { login, refused } = await this.logins.resolve(data);
      // The user's session ended while the query waited: it never runs.
      if (refused) return await this.lifecycle.refused(data, refused);
      const outcome = await this.pool.run(data, { login });
      await this.lifecycle.finish(data, outcome);
      return outcome;
    } catch (err) {
      this.logger.error(`query ${data.queryId} failed in the pool: ${(err as Error).message}`);
      await this.lifecycle.crashed(data);
      throw err;
    } finally {
      this.running.delete(data.queryId);
    }
  }

  /** SIGTERM: take no new jobs, let running ones finish within the grace period, cancel the rest. */
  async onModuleDestroy(): Promise<void> {
    const closing = this.worker?.close();
    const grace = new Promise<'timeout'>((resolve) =>
      setTimeout(() => resolve('timeout'), this.config.shutdownGraceMs).unref(),
    );
    if ((await Promise.race([closing, grace])) === 'timeout' && this.running.size > 0) {
      this.logger.warn(
        `cancelling ${this.running.size} queries still running after the grace period`,
      );
      await Promise.all([...this.running].map((id) => this.sink.cancel(id)));
      await closing;
    }
    // Shutdown: a connection already closed or down has nothing left to flush.
    await this.connection.quit().catch(() => undefined);
  }
}
