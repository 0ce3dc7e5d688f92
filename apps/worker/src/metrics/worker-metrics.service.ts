import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { Queue } from 'bullmq';
import type Redis from 'ioredis';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { EXECUTE_QUEUE } from '@app/contracts';
import { QueryPoolService } from '@app/execution';
import { RedisKeys } from '@app/transport';
import { OPS_REDIS } from '../health/ops.tokens';

/**
 * Prometheus metrics of a worker process: the BullMQ queue's depth by state, its thread pool's
 * utilisation, queue and threads, and Node's own (event-loop delay among them).
 */
@Injectable()
export class WorkerMetricsService implements OnModuleDestroy {
  readonly registry = new Registry();
  private readonly logger = new Logger(WorkerMetricsService.name);
  private readonly queue: Queue;
  private completedSeen = 0;

  constructor(
    @Inject(SLUICE_CONFIG) config: SluiceConfig,
    @Inject(OPS_REDIS) redis: Redis,
    pool: QueryPoolService,
  ) {
    this.queue = new Queue(EXECUTE_QUEUE, {
      connection: redis,
      prefix: new RedisKeys(config.keyPrefix).bullPrefix,
    });
    this.registry.setDefaultLabels({ app: 'worker' });
    collectDefaultMetrics({ register: this.registry });
    const registers = [this.registry];
    const depth: Gauge<'state'> = new Gauge({
      name: 'sluice_queue_jobs',
      help: 'Jobs in the BullMQ execution queue, by state (all apis and workers together).',
      labelNames: ['state'],
      registers,
      collect: async () => {
        try {
          const counts = await this.queue.getJobCounts(
            'wait',
            'prioritized',
            'active',
            'delayed',
            'completed',
            'failed',
          );
          depth.set({ state: 'waiting' }, (counts.wait ?? 0) + (counts.prioritized ?? 0));
          for (const state of ['active', 'delayed', 'completed', 'failed']) {
            depth.set({ state }, counts[state] ?? 0);
          }
        } catch (err) {
          this.logger.warn(`metrics: queue depth unavailable: ${(err as Error).message}`);
        }
      },
    });
    const utilization: Gauge = new Gauge({
      name: 'sluice_pool_utilization',
      help: 'Share of the thread pool’s capacity in use since it started (piscina utilization, 0-1).',
      registers,
      collect: () => utilization.set(pool.stats.utilization),
    });
    const queued: Gauge = new Gauge({
      name: 'sluice_pool_queue_size',
      help: 'Tasks waiting for a free thread slot.',
      registers,
      collect: () => queued.set(pool.stats.queueSize),
    });
    const threads: Gauge = new Gauge({
      name: 'sluice_pool_threads',
      help: 'Threads in the pool.',
      registers,
      collect: () => threads.set(pool.stats.threads),
    });
    new Gauge({
      name: 'sluice_pool_capacity',
      help: 'Jobs this worker runs at once (threads × tasks per thread).',
      registers,
    }).set(pool.capacity);
    const completed: Counter = new Counter({
      name: 'sluice_pool_tasks_completed_total',
      help: 'Tasks the pool finished (statements run, and start-up checks).',
      registers,
      collect: () => {
        const now = pool.stats.completed;
        if (now > this.completedSeen) completed.inc(now - this.completedSeen);
        this.completedSeen = now;
      },
    });
  }

  async onModuleDestroy(): Promise<void> {
    await this.queue.close().catch(() => undefined);
  }
}
