import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { HealthModule } from '../health/health.module';
import { AdmissionService } from './admission.service';
import { ExecuteController } from './execute.controller';
import { ExecuteService } from './execute.service';
import { QueriesModule } from '../queries/queries.module';
import { MetricsModule } from '../metrics/metrics.module';

@Module({
  // HealthModule: which workers are alive (no worker: 503 at once rather than a queue wait).
  // MetricsModule: spool checks that fail are counted.
  // QueriesModule: a repeated request (same Idempotency-Key) is answered with the kept result.
  imports: [AuthModule, HealthModule, QueriesModule, MetricsModule],
  controllers: [ExecuteController],
  providers: [AdmissionService, ExecuteService],
})
export class ExecuteModule {}
