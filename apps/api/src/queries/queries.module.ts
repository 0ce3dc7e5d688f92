import { Logger, Module } from '@nestjs/common';
import { JobQueue } from '@app/transport';
import { QUERIES_OF_USER } from '@app/users';
import { AuthModule } from '../auth/auth.module';
import { HealthModule } from '../health/health.module';
import { QueriesController } from './queries.controller';
import { QueriesService } from './queries.service';
import { KeptResultService } from './kept-result.service';
import { UserChangeWatcher } from './user-change.watcher';
import { SpoolSweepService } from './spool-sweep.service';
import { MetricsModule } from '../metrics/metrics.module';
import { WorkerRosterService } from '../health/worker-roster.service';
import { JOB_QUEUE } from '../infra/tokens';
import { ProducerWatch } from './producer.watch';

@Module({
  imports: [AuthModule, HealthModule, MetricsModule],
  controllers: [QueriesController],
  providers: [
    QueriesService,
    KeptResultService,
    UserChangeWatcher,
    SpoolSweepService,
    {
      // The one judge of quiet result streams, for the execute response and kept results alike.
      provide: ProducerWatch,
      useFactory: (queue: JobQueue, workers: WorkerRosterService) =>
        new ProducerWatch(queue, workers, new Logger(ProducerWatch.name)),
      inject: [JOB_QUEUE, WorkerRosterService],
    },
    // What UserAdminService ends of a user it deletes or moves (UserAdminModule).
    { provide: QUERIES_OF_USER, useExisting: QueriesService },
  ],
  exports: [QueriesService, KeptResultService, ProducerWatch, QUERIES_OF_USER],
})
export class QueriesModule {}
