import { Body, Controller, Get, Headers, Param, Post, Query, Res, UseGuards } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiBasicAuth,
  ApiBody,
  ApiConsumes,
  ApiHeader,
  ApiOkResponse,
  ApiParam,
  ApiProduces,
  ApiResponse,
  ApiTags,
} from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';
import { SluiceError } from '@app/contracts';
import { ExecuteRequestDto } from '@app/http-contracts';
import { AuthUser } from '../auth/auth-user';
import { CredentialsGuard } from '../auth/credentials.guard';
import { CurrentUser } from '../auth/current-user.decorator';
import { requestTrace } from '../tracing/request.trace';
import { ExecuteQueryPipe } from './execute-query.pipe';
import { ExecuteService } from './execute.service';
import { ExecutionResponse } from './execution.response';
import { ResponseOptions } from './request.negotiation';

/**
 * Sends an execution's body. Its close() runs on the response's close event, however the
 * response ends — also before the body's first read, when nothing else would release it.
 */
export function send(reply: FastifyReply, result: ExecutionResponse): FastifyReply {
  const close = () => void result.close();
  if (reply.raw.destroyed) close();
  else reply.raw.once('close', close);
  reply
    .code(result.httpStatus ?? 200)
    .headers(result.headers ?? {})
    .header('content-type', result.contentType)
    .header('x-query-id', result.queryId)
    .header('cache-control', 'no-store')
    .header('vary', 'Accept, Accept-Encoding');
  if (result.contentEncoding) reply.header('content-encoding', result.contentEncoding);
  return reply.send(result.body);
}

/** A header sent more than once, as the one comma-separated list it stands for (RFC 9110 §5.3). */
function joinRepeated(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** A header that must come once: two are an ambiguous request. */
function single(value: string | string[] | undefined): string | undefined {
  if (Array.isArray(value)) {
    throw new SluiceError('INVALID_REQUEST', 'ambiguous request: two Idempotency-Key headers');
  }
  return value;
}

/** Aborted when the client's connection closes before its response is done. */
export function clientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  // Gone already (while the request was authenticated): its close event has been and gone.
  if (reply.raw.destroyed) controller.abort();
  else {
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) controller.abort();
    });
  }
  return controller.signal;
}

/** The request headers that shape the response. */
function responseOptions(
  headers: IncomingHttpHeaders,
  reply: FastifyReply,
  database?: string,
): ResponseOptions {
  return {
    signal: clientGone(reply),
    accept: headers.accept,
    acceptEncoding: joinRepeated(headers['accept-encoding']),
    preferredEncoding: joinRepeated(headers['preferred-encoding']),
    preferredLevel: joinRepeated(headers['preferred-compression-level']),
    prefer: joinRepeated(headers.prefer),
    idempotencyKey: single(headers['idempotency-key']),
    database,
    trace: requestTrace(reply.request),
  };
}

const ENVELOPE = {
  description: 'Error envelope `{query_id?, status:{reason, sql_state, vendor_code}}`.',
};

@ApiTags('execute')
@ApiBearerAuth()
@ApiBasicAuth()
@ApiHeader({
  name: 'Accept',
  required: false,
  enum: ['application/json', 'application/stream+json'],
})
@ApiProduces('application/json', 'application/stream+json')
@ApiOkResponse({
  description: 'Result: `{query_id, schema?, data, status}` (status last), or NDJSON lines.',
})
@ApiResponse({
  status: 202,
  description:
    'With `wait_timeout` (or `Prefer: respond-async`/`wait=N`) and no result within the wait: ' +
    '`{query_id, state, queue_position, links:{self, result}, status}`, `Location` the query URL.',
})
@ApiResponse({ status: 400, ...ENVELOPE })
@ApiResponse({ status: 401, ...ENVELOPE })
@ApiResponse({ status: 403, ...ENVELOPE })
@ApiResponse({ status: 406, ...ENVELOPE })
@ApiResponse({ status: 413, ...ENVELOPE })
@ApiResponse({ status: 415, ...ENVELOPE })
@ApiResponse({ status: 500, ...ENVELOPE })
@ApiResponse({ status: 503, ...ENVELOPE })
@Controller('v1/execute')
@UseGuards(CredentialsGuard)
export class ExecuteController {
  constructor(private readonly executions: ExecuteService) {}

  @Post()
  @ApiConsumes('application/json', 'text/plain')
  @ApiBody({
    type: ExecuteRequestDto,
    description:
      'JSON request, or with text/plain the statement itself (options in the query string).',
  })
  async post(
    @Body() body: ExecuteRequestDto,
    @CurrentUser() user: AuthUser,
    @Headers() headers: IncomingHttpHeaders,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    return send(reply, await this.executions.execute(body, user, responseOptions(headers, reply)));
  }

  @Post(':database')
  @ApiParam({ name: 'database' })
  @ApiConsumes('application/json', 'text/plain')
  @ApiBody({ type: ExecuteRequestDto })
  async postTo(
    @Param('database') database: string,
    @Body() body: ExecuteRequestDto,
    @CurrentUser() user: AuthUser,
    @Headers() headers: IncomingHttpHeaders,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    return send(
      reply,
      await this.executions.execute(body, user, responseOptions(headers, reply, database)),
    );
  }

  // Its query parameters are ExecuteRequestDto's fields (openapi.document.ts lists them).
  @Get()
  async get(
    @Query(ExecuteQueryPipe) request: Readonly<ExecuteRequestDto>,
    @CurrentUser() user: AuthUser,
    @Headers() headers: IncomingHttpHeaders,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    return send(
      reply,
      await this.executions.execute(request, user, responseOptions(headers, reply)),
    );
  }

  @Get(':database')
  @ApiParam({ name: 'database' })
  async getFrom(
    @Param('database') database: string,
    @Query(ExecuteQueryPipe) request: Readonly<ExecuteRequestDto>,
    @CurrentUser() user: AuthUser,
    @Headers() headers: IncomingHttpHeaders,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    return send(
      reply,
      await this.executions.execute(request, user, responseOptions(headers, reply, database)),
    );
  }
}
