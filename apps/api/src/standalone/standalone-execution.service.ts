import { Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { MessageChannel } from 'node:worker_threads';
import { ERROR_CATALOGUE, ExecuteJobData } from '@app/contracts';
import { QueryPoolService } from '@app/execution';
import { InProcessJobQueue, InProcessResultChannel } from '@app/transport';

/** Standalone mode's worker: takes jobs off the in-process queue and runs them in the pool. */
@Injectable()
export class StandaloneExecutionService implements OnApplicationBootstrap {
  private readonly logger = new Logger(StandaloneExecutionService.name);

  constructor(
    private readonly queue: InProcessJobQueue,
    private readonly channel: InProcessResultChannel,
    private readonly pool: QueryPoolService,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.pool.check();
    this.queue.consume((job) => this.run(job), this.pool.capacity);
  }

  private async run(job: ExecuteJobData): Promise<void> {
    const { port1, port2 } = new MessageChannel();
    this.channel.attach(job.queryId, port1);
    try {
      await this.pool.run(job, port2);
    } catch (err) {
      this.logger.error(`query ${job.queryId} failed in the pool: ${(err as Error).message}`);
      const entry = ERROR_CATALOGUE.INTERNAL;
      this.channel.fail(job.queryId, {
        kind: 'error',
        status: { reason: entry.reason, sql_state: entry.sqlState, vendor_code: entry.vendorCode },
      });
      throw err;
    }
  }
}
