import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { HealthModule } from '../health/health.module';
import { QueriesController } from './queries.controller';
import { QueriesService } from './queries.service';
import { KeptResultService } from './kept-result.service';
import { UserChangeWatcher } from './user-change.watcher';
import { SpoolSweepService } from './spool-sweep.service';
import { MetricsModule } from '../metrics/metrics.module';

@Module({
  imports: [AuthModule, HealthModule, MetricsModule],
  controllers: [QueriesController],
  providers: [QueriesService, KeptResultService, UserChangeWatcher, SpoolSweepService],
  exports: [QueriesService, KeptResultService],
})
export class QueriesModule {}
