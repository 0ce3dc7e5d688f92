import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { HealthModule } from '../health/health.module';
import { AdmissionService } from './admission.service';
import { ExecuteController } from './execute.controller';
import { ExecuteService } from './execute.service';

@Module({
  // HealthModule: which workers are alive (no worker: 503 at once rather than a queue wait).
  imports: [AuthModule, HealthModule],
  controllers: [ExecuteController],
  providers: [AdmissionService, ExecuteService],
})
export class ExecuteModule {}
