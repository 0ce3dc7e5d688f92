import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { SLUICE_CONFIG, SluiceConfig, heapGrowthGauge } from '@app/config';
import { Lane } from '@app/contracts';
import { QueryPoolService, registerPoolMetrics, spoolWriteErrorsOf } from '@app/execution';
import { JobQueue, RedisConnector, RedisKeys } from '@app/transport';
import { BullmqJobQueue } from '@app/queue';

/**
 * Prometheus metrics of a worker process: the BullMQ queue's depth by state, the jobs it put off
 * for their user's share of its slots, its thread pool's utilisation, queue and threads, and
 * Node's own (event-loop delay among them).
 */
@Injectable()
export class WorkerMetricsService implements OnModuleDestroy {
  readonly registry = new Registry();
  private readonly logger = new Logger(WorkerMetricsService.name);
  private readonly queue: JobQueue;
  private readonly putOffs: Counter<'lane'>;

  constructor(@Inject(SLUICE_CONFIG) config: SluiceConfig, pool: QueryPoolService) {
    this.queue = new BullmqJobQueue(
      // BullMQ's own connection; fails fast, as the other probes of this module.
      new RedisConnector(config.redis!).connect({
        maxRetriesPerRequest: 1,
        connectTimeout: 2_000,
      }),
      new RedisKeys(config.keyPrefix),
      { seconds: config.jobRetentionSeconds, count: config.jobRetentionCount },
    );
    this.registry.setDefaultLabels({ app: 'worker' });
    collectDefaultMetrics({ register: this.registry });
    const registers = [this.registry];
    const depth: Gauge<'lane' | 'state'> = new Gauge({
      name: 'sluice_queue_jobs',
      help: 'Jobs in the BullMQ execution queues, by lane and state (all apis and workers together).',
      labelNames: ['lane', 'state'],
      registers,
      collect: async () => {
        try {
          for (const [lane, counts] of Object.entries(await this.queue.counts())) {
            for (const [state, count] of Object.entries(counts)) {
              if (count !== undefined) depth.set({ lane, state }, count);
            }
          }
        } catch (err) {
          this.logger.warn(`metrics: queue depth unavailable: ${(err as Error).message}`);
        }
      },
    });
    this.putOffs = new Counter({
      name: 'sluice_user_share_put_offs_total',
      help: 'Jobs this worker took and put back in the queue, by lane: their user held their share of its slots (SLUICE_WORKER_USER_SHARE_PERCENT).',
      labelNames: ['lane'],
      registers,
    });
    const writes = spoolWriteErrorsOf(pool);
    new Counter({
      name: 'sluice_spool_errors_total',
      help: 'Operations on the spool that failed in this worker: write (a kept result the spool refused; the query failed and its segments were removed).',
      labelNames: ['operation'],
      registers,
      collect() {
        writes(this);
      },
    }).inc({ operation: 'write' }, 0);
    new Gauge({ ...heapGrowthGauge(), registers });
    registerPoolMetrics(this.registry, pool);
  }

  /** A job of `lane` was put off: its user held their share of this worker's slots. */
  putOff(lane: Lane): void {
    this.putOffs.inc({ lane });
  }

  async onModuleDestroy(): Promise<void> {
    // Shutdown: the queue holds no connection of its own (the ops client is quit after it).
    await this.queue.close().catch(() => undefined);
  }
}
