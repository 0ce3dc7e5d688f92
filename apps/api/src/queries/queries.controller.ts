import { Controller, Delete, Get, Param, UseGuards } from '@nestjs/common';
import {
  ApiBasicAuth,
  ApiBearerAuth,
  ApiNotFoundResponse,
  ApiOkResponse,
  ApiTags,
} from '@nestjs/swagger';
import { QueryInfo } from '@app/contracts';
import { AuthUser } from '../auth/auth-user';
import { CredentialsGuard } from '../auth/credentials.guard';
import { CurrentUser } from '../auth/current-user.decorator';
import { QueriesService } from './queries.service';

@ApiTags('queries')
@ApiBearerAuth()
@ApiBasicAuth()
@Controller('v1/queries')
@UseGuards(CredentialsGuard)
export class QueriesController {
  constructor(private readonly queries: QueriesService) {}

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

  @Delete(':queryId')
  @ApiOkResponse({ description: 'Cancels the query; answers its state after the request.' })
  @ApiNotFoundResponse({ description: 'No such query, or not yours.' })
  cancel(@Param('queryId') queryId: string, @CurrentUser() user: AuthUser): Promise<QueryInfo> {
    return this.queries.cancel(queryId, user);
  }
}
