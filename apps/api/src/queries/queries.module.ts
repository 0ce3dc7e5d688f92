import { Module } from '@nestjs/common';
import { QUERIES_OF_USER } from '@app/users';
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
  providers: [
    QueriesService,
    KeptResultService,
    UserChangeWatcher,
    SpoolSweepService,
    // What UserAdminService ends of a user it deletes or moves (UserAdminModule).
    { provide: QUERIES_OF_USER, useExisting: QueriesService },
  ],
  exports: [QueriesService, KeptResultService, QUERIES_OF_USER],
})
export class QueriesModule {}
