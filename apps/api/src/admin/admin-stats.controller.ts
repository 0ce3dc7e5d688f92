import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { SluiceError } from '@app/contracts';
import { AuthUser } from '../auth/auth-user';
import { CurrentUser } from '../auth/current-user.decorator';
import { ApiMetricsService } from '../metrics/api-metrics.service';
import type { ServiceHistoryView } from '../metrics/service.history';
import { AdminSessionGuard } from './admin-session.guard';

/** The admin page's charts: this api's last minutes of requests and queue depth. */
@ApiExcludeController()
@Controller('admin/api/stats')
@UseGuards(AdminSessionGuard)
export class AdminStatsController {
  constructor(private readonly metrics: ApiMetricsService) {}

  /** Administrators only: the counts are everyone's. */
  @Get()
  stats(@CurrentUser() user: AuthUser): ServiceHistoryView {
    if (!user.isAdmin) {
      throw new SluiceError('FORBIDDEN', "only administrators see the service's charts");
    }
    return this.metrics.history.view();
  }
}
