import { Controller, Delete, Get, Header, Headers, Param, Res, UseGuards } from '@nestjs/common';
import {
  ApiBasicAuth,
  ApiBearerAuth,
  ApiNotFoundResponse,
  ApiOkResponse,
  ApiResponse,
  ApiTags,
} from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { QueryInfo, ResultManifest } from '@app/contracts';
import { AuthUser } from '../auth/auth-user';
import { CredentialsGuard } from '../auth/credentials.guard';
import { CurrentUser } from '../auth/current-user.decorator';
import { clientGone, send } from '../execute/execute.controller';
import { KeptResultService } from './kept-result.service';
import { QueriesService } from './queries.service';

@ApiTags('queries')
@ApiBearerAuth()
@ApiBasicAuth()
@Controller('v1/queries')
@UseGuards(CredentialsGuard)
export class QueriesController {
  constructor(
    private readonly queries: QueriesService,
    private readonly kept: KeptResultService,
  ) {}

  @Get()
  @ApiOkResponse({ description: "Your recent queries (admins: everyone's), newest first." })
  list(@CurrentUser() user: AuthUser): Promise<QueryInfo[]> {
    return this.queries.list(user);
  }

  @Get(':queryId')
  @ApiOkResponse({
    description: 'State, queue position, timings, rows and bytes sent, owner, final status.',
  })
  @ApiNotFoundResponse({ description: 'No such query, or not yours.' })
  get(@Param('queryId') queryId: string, @CurrentUser() user: AuthUser): Promise<QueryInfo> {
    return this.queries.get(queryId, user);
  }

  @Get(':queryId/result')
  @ApiOkResponse({
    description:
      'The kept result of a query sent with wait_timeout, in the format and compression it was ' +
      'asked with, from the start (as it comes while the query runs). A finished one answers ' +
      '`Range: bytes=N-` with 206 from byte N; on one still running, Range is ignored (200).',
  })
  @ApiResponse({ status: 206, description: 'The bytes from N on (Content-Range).' })
  @ApiResponse({ status: 410, description: 'The result is no longer kept (past its TTL).' })
  @ApiResponse({
    status: 413,
    description:
      'The query failed: its result passed SLUICE_RESULT_MAX_BYTES, or all kept results SLUICE_RESULT_TOTAL_MAX_BYTES.',
  })
  @ApiNotFoundResponse({ description: 'No such query, not yours, or it keeps no result.' })
  async result(
    @Param('queryId') queryId: string,
    @CurrentUser() user: AuthUser,
    @Headers('range') range: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    const record = await this.queries.ownRecord(queryId, user);
    return send(reply, await this.kept.fetch(record, range, clientGone(reply)));
  }

  @Get(':queryId/result/segments')
  @ApiOkResponse({
    description:
      "The manifest of a spooled kept result: each segment's offset and size, in order (the body " +
      'of …/result is their bytes end to end), and, when SLUICE_SPOOL_PRESIGN_SECONDS > 0 and the ' +
      'store is S3, a presigned URL that reads it straight from the store until expires_at. ' +
      'While the query runs: the segments written so far, complete false.',
  })
  @ApiResponse({ status: 410, description: 'The result is no longer kept, or a segment is lost.' })
  @ApiNotFoundResponse({
    description: 'No such query, not yours, it keeps no result, or results are not spooled here.',
  })
  // Its URLs read the result with no other credential: no cache may keep them.
  @Header('cache-control', 'no-store')
  async segments(
    @Param('queryId') queryId: string,
    @CurrentUser() user: AuthUser,
  ): Promise<ResultManifest> {
    return this.kept.manifest(await this.queries.ownRecord(queryId, user));
  }

  @Delete(':queryId')
  @ApiOkResponse({ description: 'Cancels the query; answers its state after the request.' })
  @ApiNotFoundResponse({ description: 'No such query, or not yours.' })
  cancel(@Param('queryId') queryId: string, @CurrentUser() user: AuthUser): Promise<QueryInfo> {
    return this.queries.cancel(queryId, user);
  }
}
