import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { Queue } from 'bullmq';
import type Redis from 'ioredis';
import { Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { EXECUTE_QUEUE } from '@app/contracts';
import { QueryPoolService, registerPoolMetrics } from '@app/execution';
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
    registerPoolMetrics(this.registry, pool);
  }

  async onModuleDestroy(): Promise<void> {
    // Shutdown: the queue holds no connection of its own (the ops client is quit after it).
    await this.queue.close().catch(() => undefined);
  }
}
