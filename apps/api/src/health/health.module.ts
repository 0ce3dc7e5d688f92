import { Module } from '@nestjs/common';
import { HealthController } from './health.controller';
import { ReadinessService } from './readiness.service';
import { WorkerRosterService } from './worker-roster.service';

/** /health/live and /health/ready, and who knows which workers are alive. */
@Module({
  controllers: [HealthController],
  providers: [ReadinessService, WorkerRosterService],
  exports: [WorkerRosterService],
})
export class HealthModule {}
