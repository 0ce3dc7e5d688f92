import { Controller, Delete, Get, Param, UseGuards } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { QueryInfo } from '@app/contracts';
import { AuthUser } from '../auth/auth-user';
import { CurrentUser } from '../auth/current-user.decorator';
import { QueriesService } from '../queries/queries.service';
import { AdminSessionGuard } from './admin-session.guard';

/**
 * The query view's data, under /admin where its cookie goes: the same as GET and DELETE
 * /v1/queries (administrators see everyone's queries, others their own).
 */
@ApiExcludeController()
@Controller('admin/api/queries')
@UseGuards(AdminSessionGuard)
export class AdminQueriesController {
  constructor(private readonly queries: QueriesService) {}

  @Get()
  list(@CurrentUser() user: AuthUser): Promise<QueryInfo[]> {
    return this.queries.list(user);
  }

  @Delete(':queryId')
  cancel(@Param('queryId') queryId: string, @CurrentUser() user: AuthUser): Promise<QueryInfo> {
    return this.queries.cancel(queryId, user);
  }
}
