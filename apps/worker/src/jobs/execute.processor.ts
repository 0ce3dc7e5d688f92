import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnModuleDestroy,
} from '@nestjs/common';
import { Job, Worker } from 'bullmq';
import Redis from 'ioredis';
import { EXECUTE_QUEUE, ERROR_CATALOGUE, ExecuteJobData } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { RedisKeys, RedisResultWriter } from '@app/transport';
import { ExecutionOutcome, QueryPoolService } from '@app/execution';

/** Takes execution jobs off the BullMQ queue and runs each in the thread pool. */
@Injectable()
export class ExecuteProcessor implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(ExecuteProcessor.name);
  private readonly keys: RedisKeys;
  private readonly connection: Redis;
  private worker: Worker<ExecuteJobData, ExecutionOutcome> | undefined;

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    private readonly pool: QueryPoolService,
  ) {
    this.keys = new RedisKeys(config.keyPrefix);
    // BullMQ workers need maxRetriesPerRequest null on their connection.
    this.connection = new Redis(config.redisUrl!, { maxRetriesPerRequest: null });
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.connection.ping();
    await this.pool.check();
    this.worker = new Worker<ExecuteJobData, ExecutionOutcome>(
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

  private async process(job: Job<ExecuteJobData, ExecutionOutcome>): Promise<ExecutionOutcome> {
    try {
      return await this.pool.run(job.data);
    } catch (err) {
      // The thread died or failed before it could report: end the stream so the client learns.
      this.logger.error(`query ${job.data.queryId} failed in the pool: ${(err as Error).message}`);
      const entry = ERROR_CATALOGUE.INTERNAL;
      const status = {
        reason: entry.reason,
        sql_state: entry.sqlState,
        vendor_code: entry.vendorCode,
      };
      const writer = new RedisResultWriter(
        this.connection,
        this.keys,
        job.data.queryId,
        { chunks: 1, bytes: 1, idleTimeoutMs: 1 },
        this.config.streamTtlSeconds,
      );
      await writer.write({ kind: 'error', status }).catch(() => undefined);
      throw err;
    }
  }

  async onModuleDestroy(): Promise<void> {
    await this.worker?.close();
    await this.connection.quit().catch(() => undefined);
  }
}
