import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { HealthModule } from '../health/health.module';
import { QueriesController } from './queries.controller';
import { QueriesService } from './queries.service';
import { KeptResultService } from './kept-result.service';
import { UserChangeWatcher } from './user-change.watcher';

@Module({
  imports: [AuthModule, HealthModule],
  controllers: [QueriesController],
  providers: [QueriesService, KeptResultService, UserChangeWatcher],
  exports: [QueriesService, KeptResultService],
})
export class QueriesModule {}
