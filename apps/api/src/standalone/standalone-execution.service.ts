import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnModuleDestroy,
} from '@nestjs/common';
import { MessageChannel } from 'node:worker_threads';
import { ExecuteJobData } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig, defaultDatabase } from '@app/config';
import {
  JobLifecycle,
  JobRunner,
  QueryLifecycle,
  QueryPoolService,
  SessionLoginResolver,
  drainWithin,
} from '@app/execution';
import { InProcessJobQueue, InProcessResultChannel, QueryRegistry } from '@app/transport';
import { QUERY_REGISTRY } from '../infra/tokens';

/**
 * Standalone mode's worker: takes jobs of every lane off the in-process queue and runs them in
 * the pool, export jobs never on the interactive reserve (SLUICE_WORKER_INTERACTIVE_RESERVE).
 */
@Injectable()
export class StandaloneExecutionService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(StandaloneExecutionService.name);
  private readonly lifecycle: JobLifecycle;
  private readonly runner: JobRunner;
  private readonly running = new Map<string, Promise<void>>();

  constructor(
    private readonly queue: InProcessJobQueue,
    private readonly channel: InProcessResultChannel,
    private readonly pool: QueryPoolService,
    private readonly logins: SessionLoginResolver,
    @Inject(QUERY_REGISTRY) private readonly registry: QueryRegistry,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    queries: QueryLifecycle,
  ) {
    // The process's one writer of query states: the api's and its pool's ends alike.
    this.lifecycle = new JobLifecycle(queries, channel);
    this.runner = new JobRunner(this.lifecycle, {
      resolve: (job) => logins.resolve(job),
      tracing: {
        system: 'sluice_in_process',
        settings: config.tracing,
        database: defaultDatabase(config),
      },
      logger: this.logger,
    });
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.pool.check();
    await this.logins.check();
    this.queue.consume(
      (job) => this.track(job),
      { interactive: this.pool.capacity('interactive'), export: this.pool.capacity('export') },
      this.config.workerUserSharePercent,
    );
  }

  private track(job: ExecuteJobData): Promise<void> {
    const run = this.run(job).finally(() => this.running.delete(job.queryId));
    this.running.set(job.queryId, run);
    return run;
  }

  private async run(job: ExecuteJobData): Promise<void> {
    await this.runner.run(job, (login, trace) => {
      const { port1, port2 } = new MessageChannel();
      this.channel.attach(job.queryId, port1, {
        onProgress: (produced) =>
          // Shown, not relied on: in memory, it cannot fail.
          void this.registry.progress(job.queryId, produced),
        owner: job.username,
      });
      const ownerKept = this.channel.ownerKept(job.username);
      return this.pool.run(job, { port: port2, login, ownerKept, trace });
    });
  }

  /** Queries running in the pool now: what a shutdown waits for. */
  get runningCount(): number {
    return this.running.size;
  }

  /** Shutdown: no new jobs; running ones get the grace period, then are cancelled. */
  async onModuleDestroy(): Promise<void> {
    await this.queue.close();
    await drainWithin(
      Promise.allSettled([...this.running.values()]),
      this.config.shutdownGraceMs,
      () => Promise.all([...this.running.keys()].map((id) => this.channel.cancel(id))),
    );
    this.lifecycle.close();
  }
}
