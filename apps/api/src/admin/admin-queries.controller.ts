import { Controller, Delete, Get, Param, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { ApiExcludeController } from '@nestjs/swagger';
import { QueryInfo } from '@app/contracts';
import { AuthUser } from '../auth/auth-user';
import { CurrentUser } from '../auth/current-user.decorator';
import { clientGone, send } from '../execute/execute.controller';
import { KeptResultService } from '../queries/kept-result.service';
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
  constructor(
    private readonly queries: QueriesService,
    private readonly kept: KeptResultService,
  ) {}

  @Get()
  list(@CurrentUser() user: AuthUser): Promise<QueryInfo[]> {
    return this.queries.list(user);
  }

  /** One query, its statement whole (as its record holds it): the page's detail view. */
  @Get(':queryId')
  get(@Param('queryId') queryId: string, @CurrentUser() user: AuthUser): Promise<QueryInfo> {
    return this.queries.get(queryId, user);
  }

  /** A kept result, for its owner only (an administrator sees others' queries, not their data). */
  @Get(':queryId/result')
  async result(
    @Param('queryId') queryId: string,
    @CurrentUser() user: AuthUser,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    const record = await this.queries.ownRecord(queryId, user);
    return send(reply, await this.kept.fetch(record, undefined, clientGone(reply)));
  }

  @Delete(':queryId')
  cancel(@Param('queryId') queryId: string, @CurrentUser() user: AuthUser): Promise<QueryInfo> {
    return this.queries.cancel(queryId, user);
  }
}
