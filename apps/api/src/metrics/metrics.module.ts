import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { HealthModule } from '../health/health.module';
import { ApiMetricsService } from './api-metrics.service';
import { MetricsController } from './metrics.controller';

/** Prometheus metrics of the api at /metrics. */
@Module({
  imports: [HealthModule, AuthModule],
  controllers: [MetricsController],
  providers: [ApiMetricsService],
  exports: [ApiMetricsService],
})
export class MetricsModule {}
