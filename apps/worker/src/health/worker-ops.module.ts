import { Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { ExecutionModule } from '@app/execution';
import { RedisClient, RedisConnector } from '@app/transport';
import { MetricsServer } from '../metrics/metrics.server';
import { WorkerMetricsService } from '../metrics/worker-metrics.service';
import { HeartbeatService } from './heartbeat.service';
import { OPS_REDIS } from './ops.tokens';
import { WorkerReadinessService } from './worker-readiness.service';

/** Operating a worker: heartbeat, readiness and metrics on SLUICE_WORKER_METRICS_PORT. */
@Module({
  imports: [ExecutionModule],
  providers: [
    {
      provide: OPS_REDIS,
      inject: [SLUICE_CONFIG],
      useFactory: (config: SluiceConfig) => {
        // Fails fast while Redis is away: a heartbeat or a probe must not wait for it.
        const redis = new RedisConnector(config.redis!).connect({
          maxRetriesPerRequest: 1,
          connectTimeout: 2_000,
        });
        // ioredis reconnects by itself; the heartbeat and the probes report an outage.
        redis.on('error', () => undefined);
        return redis;
      },
    },
    HeartbeatService,
    WorkerReadinessService,
    WorkerMetricsService,
    MetricsServer,
  ],
  exports: [WorkerMetricsService],
})
export class WorkerOpsModule implements OnApplicationShutdown {
  constructor(@Inject(OPS_REDIS) private readonly redis: RedisClient) {}

  async onApplicationShutdown(): Promise<void> {
    // Shutdown: a connection already closed or down has nothing left to flush.
    await this.redis.quit().catch(() => undefined);
  }
}
