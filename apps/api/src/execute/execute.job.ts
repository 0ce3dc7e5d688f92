import { ExecuteJobData } from '@app/contracts';
import { SluiceConfig } from '@app/config';
import { BoundStatement } from '@app/sql';
import { AuthUser } from '../auth/auth-user';
import { NegotiatedRequest } from './request.negotiation';

/** What a job is made of: the negotiated request, its bound statement, who runs it, and when. */
export interface JobParts {
  negotiated: NegotiatedRequest;
  queryId: string;
  bound: BoundStatement;
  user: AuthUser;
  /** When it was asked for (epoch ms): its queue wait counts from here. */
  now: number;
}

export type JobLimits = Pick<
  SluiceConfig,
  | 'maxQueueWaitMs'
  | 'statementTimeoutMs'
  | 'maxStatementTimeoutMs'
  | 'resultTtlSeconds'
  | 'resultMaxBytes'
  | 'resultTotalMaxBytes'
  | 'resultUserMaxBytes'
  | 'spool'
>;

/** The job a worker runs for one request. */
export function buildJob(parts: JobParts, config: JobLimits): ExecuteJobData {
  const { negotiated, bound, user, now } = parts;
  const { request } = negotiated;
  return {
    queryId: parts.queryId,
    text: bound.text,
    values: bound.values,
    types: bound.types,
    username: user.username,
    role: user.role,
    readOnly: user.readOnly,
    session: user.session,
    database: request.database ?? user.database,
    schema: request.schema,
    format: negotiated.format,
    parquetCompression: negotiated.parquetCompression,
    layout: request.format ?? 'array',
    fetchSize: request.fetch_size ?? 0,
    maxRows: request.max_rows,
    encoding: negotiated.encoding,
    timeoutMs: timeoutFor(request.timeout, config),
    startBy: now + config.maxQueueWaitMs,
    lane: negotiated.lane,
    enqueuedAt: now,
    // A query that may be answered before its result, or repeated, keeps it for a later fetch.
    kept:
      negotiated.wait || negotiated.idempotencyKey || request.resumable
        ? keptOf(config)
        : undefined,
  };
}

/** How a kept result is kept: in the spool, with its caps, when there is one; else in Redis. */
function keptOf(config: JobLimits): NonNullable<ExecuteJobData['kept']> {
  const { spool } = config;
  if (spool) {
    return {
      ttlSeconds: config.resultTtlSeconds,
      maxBytes: spool.maxBytes,
      totalMaxBytes: spool.totalMaxBytes,
      userMaxBytes: spool.userMaxBytes,
      spooled: true,
    };
  }
  return {
    ttlSeconds: config.resultTtlSeconds,
    maxBytes: config.resultMaxBytes,
    totalMaxBytes: config.resultTotalMaxBytes,
    userMaxBytes: config.resultUserMaxBytes,
  };
}

/** The statement's time limit: the request's, capped by the maximum, or the server default. */
function timeoutFor(requested: number | undefined, config: JobLimits): number | undefined {
  const ms = requested ?? config.statementTimeoutMs;
  if (!ms) return undefined;
  return Math.min(ms, config.maxStatementTimeoutMs);
}
