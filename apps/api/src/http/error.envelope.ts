import { HttpException, Logger } from '@nestjs/common';
import { isConnectTimeout } from '@app/access';
import { ERROR_CATALOGUE, ErrorCode, ErrorEnvelope, SluiceError } from '@app/contracts';
import { ExecutionFailedError } from './execution-failed.error';

/** An error ready to be written: HTTP status, headers and the spec's envelope. */
export interface EnvelopeReply {
  httpStatus: number;
  headers: Record<string, string>;
  body: ErrorEnvelope;
}

const BY_HTTP_STATUS: Record<number, ErrorCode> = {
  400: 'INVALID_REQUEST',
  401: 'AUTH_REQUIRED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'NOT_FOUND',
  406: 'NOT_ACCEPTABLE',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'QUEUE_FULL',
  503: 'UNAVAILABLE',
};

/** What a 415 says: the types a body may have, as a 406 names the result types. */
const ACCEPTED_BODY_TYPES =
  'Content-Type must be application/json or text/plain (UTF-8), for the statement as JSON or as text';

function fromCode(
  code: ErrorCode,
  reason: string,
  headers: Record<string, string> = {},
): EnvelopeReply {
  const entry = ERROR_CATALOGUE[code];
  return {
    httpStatus: entry.http,
    headers,
    body: { status: { reason, sql_state: entry.sqlState, vendor_code: entry.vendorCode } },
  };
}

/** Readable reason of a Nest HttpException (validation messages joined). */
function httpExceptionReason(err: HttpException): string {
  const response = err.getResponse();
  if (typeof response === 'string') return response;
  const message = (response as { message?: unknown }).message;
  if (Array.isArray(message)) return message.join('; ');
  if (typeof message === 'string') return message;
  return err.message;
}

/** Fastify's own errors (body parsing, limits, content types) by their code. */
function fastifyError(err: {
  code: string;
  statusCode?: number;
  message: string;
}): EnvelopeReply | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return fromCode('INVALID_REQUEST', 'request body is not valid JSON');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return fromCode('PAYLOAD_TOO_LARGE', 'request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
        ? fromCode('UNSUPPORTED_MEDIA_TYPE', ACCEPTED_BODY_TYPES)
        : fromCode('INVALID_REQUEST', 'Content-Length does not match the body');
    case 'FST_ERR_CTP_INVALID_TYPE':
      return fromCode('UNSUPPORTED_MEDIA_TYPE', `invalid Content-Type: ${ACCEPTED_BODY_TYPES}`);
    case 'FST_ERR_BAD_URL':
      return fromCode('INVALID_REQUEST', 'the URL is not valid percent-encoded UTF-8');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return fromCode('INVALID_REQUEST', 'a path parameter is too long');
  }
  if (err.code.startsWith('FST_') && err.statusCode && err.statusCode < 500) {
    return fromCode(BY_HTTP_STATUS[err.statusCode] ?? 'INVALID_REQUEST', 'invalid request');
  }
  return undefined;
}

const logger = new Logger('Errors');

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  '57P01',
  '57P02',
  '57P03',
]);

/** PostgreSQL (the metadata database) cannot be reached: SQLSTATE class 08 and its kin. */
function isDatabaseDown(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (CONNECTION_CODES.has(code) || code.startsWith('08')))
    return true;
  if (isConnectTimeout(err)) return true;
  // pg's own errors carry no code; one PostgreSQL sent says what it is by its SQLSTATE alone.
  if (code !== undefined) return false;
  const message = err instanceof Error ? err.message : '';
  return /Connection terminated|connect ECONNREFUSED|timeout exceeded when trying to connect/.test(
    message,
  );
}

/** Redis errors of a node that is gone or of a cluster in the middle of a failover. */
const REDIS_DOWN =
  /^(CLUSTERDOWN|TRYAGAIN|MOVED|ASK|LOADING|READONLY|MASTERDOWN)\b|^(Connection is closed|Too many Cluster redirections|Stream isn't writeable|All sentinels are unreachable|Failed to refresh slots cache|None of startup nodes is available|Cluster isn't ready|Reached the max retries per request limit)/;

/**
 * Redis (queue and result streams) cannot be reached, or is failing over. Told by the message
 * ioredis gives, so never for an error of PostgreSQL's (it has a severity), whose message a user
 * writes (RAISE).
 */
function isRedisDown(err: unknown): boolean {
  if (!(err instanceof Error) || 'severity' in err) return false;
  return (
    ['MaxRetriesPerRequestError', 'ClusterAllFailedError'].includes(err.name) ||
    REDIS_DOWN.test(err.message)
  );
}

/**
 * Maps anything thrown while handling a request to the envelope; internals are logged only. A 503
 * always says when to try again: 1 s where its cause gave no time of its own.
 */
export function toEnvelope(err: unknown): EnvelopeReply {
  const reply = envelopeOf(err);
  if (reply.httpStatus !== 503) return reply;
  if (Object.keys(reply.headers).some((name) => name.toLowerCase() === 'retry-after')) return reply;
  return { ...reply, headers: { ...reply.headers, 'retry-after': '1' } };
}

function envelopeOf(err: unknown): EnvelopeReply {
  if (err instanceof ExecutionFailedError) {
    return {
      httpStatus: err.httpStatus,
      headers: err.headers,
      body: { query_id: err.queryId, status: err.status },
    };
  }
  if (err instanceof SluiceError) {
    return { httpStatus: err.http, headers: err.headers, body: { status: err.toStatus() } };
  }
  if (err instanceof HttpException) {
    // Nest turns Fastify's parser errors into an HttpException of their status and message
    // (routes-resolver's mapExternalException), dropping the code: a 415 is always the body's
    // type (Sluice's own 415s are SluiceErrors), and Fastify's "Unsupported Media Type" said
    // nothing of what is accepted.
    if (err.getStatus() === 415) return fromCode('UNSUPPORTED_MEDIA_TYPE', ACCEPTED_BODY_TYPES);
    const code = BY_HTTP_STATUS[err.getStatus()];
    if (code) return fromCode(code, httpExceptionReason(err));
  }
  if (
    typeof err === 'object' &&
    err !== null &&
    typeof (err as { code?: unknown }).code === 'string'
  ) {
    const mapped = fastifyError(err as { code: string; statusCode?: number; message: string });
    if (mapped) return mapped;
  }
  if (isRedisDown(err)) {
    logger.warn(`Redis unavailable: ${(err as Error).message}`);
    return fromCode('UNAVAILABLE', 'Redis is unavailable or failing over; retry later', {
      'retry-after': '1',
    });
  }
  if (isDatabaseDown(err)) return fromCode('DB_UNAVAILABLE', 'database unavailable');
  if (
    typeof err === 'object' &&
    err !== null &&
    (err as { type?: string }).type === 'entity.too.large'
  ) {
    return fromCode('PAYLOAD_TOO_LARGE', 'request body is too large');
  }
  logger.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  return fromCode('INTERNAL', ERROR_CATALOGUE.INTERNAL.reason);
}
