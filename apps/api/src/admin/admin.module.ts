import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { QueriesModule } from '../queries/queries.module';
import { AdminAuthenticatorService } from './admin-authenticator.service';
import { AdminPageController } from './admin-page.controller';
import { AdminQueriesController } from './admin-queries.controller';
import { AdminSessionController } from './admin-session.controller';
import { AdminSessionGuard } from './admin-session.guard';
import { AdminSessionService } from './admin-session.service';
import { AdminStatsController } from './admin-stats.controller';
import { MetricsModule } from '../metrics/metrics.module';
import { QueueDashboardService } from './queue-dashboard.service';

/**
 * The admin area: the query view at /admin (its sign-in cookie at /admin/session, its data at
 * /admin/api/queries) and the queue dashboard at /admin/queues.
 */
@Module({
  // Tokens are checked as AuthModule checks them: its TokenVerifier.
  imports: [AuthModule, QueriesModule, MetricsModule],
  controllers: [
    AdminPageController,
    AdminSessionController,
    AdminQueriesController,
    AdminStatsController,
  ],
  providers: [
    AdminAuthenticatorService,
    AdminSessionService,
    AdminSessionGuard,
    QueueDashboardService,
  ],
})
export class AdminModule {}
