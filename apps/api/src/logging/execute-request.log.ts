import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger as Pino } from 'pino';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { ERROR_CATALOGUE, ErrorEnvelope, FINAL_STATES, QueryState } from '@app/contracts';
import { QueryEnds, QueryLifecycle } from '@app/execution';
import { AuthUser } from '../auth/auth-user';
import { ApiMetricsService } from '../metrics/api-metrics.service';
import { requestTrace } from '../tracing/request.trace';
import { ExecuteOutcome, ExecuteSummary } from './execute.summary';
import { executeLineLogger } from './log.options';

/**
 * Longest wait for a query's end after its response closed (ms): the api records it as the
 * response ends, or just after when the client left; this bounds a registry that is slow.
 */
const SETTLE_MS = 5_000;

/** What a request carried that the summary needs, kept until its response closes. */
interface Pending {
  envelope?: ErrorEnvelope;
}

function isExecute(request: FastifyRequest): boolean {
  return request.routeOptions.url?.startsWith('/v1/execute') === true;
}

/** The statement as the client sent it (JSON or text/plain body, or the query string). */
function statementOf(request: FastifyRequest): string | undefined {
  const fromBody = (request.body as { statement?: unknown } | undefined)?.statement;
  const fromQuery = (request.query as { statement?: unknown } | undefined)?.statement;
  const statement = fromBody ?? fromQuery;
  return typeof statement === 'string' ? statement : undefined;
}

function isFinal(state: QueryState): boolean {
  return FINAL_STATES.includes(state);
}

/** Outcome when the registry cannot tell (it is unreachable): judged by the status. */
function outcomeOfStatus(httpStatus: number, vendorCode: number | undefined): ExecuteOutcome {
  if (httpStatus < 300) return 'succeeded';
  if (vendorCode === ERROR_CATALOGUE.CANCELLED.vendorCode) return 'cancelled';
  return 'failed';
}

/**
 * One JSON line per execute request — query_id, user, database, format, rows, bytes, duration,
 * outcome — written when its response closes (also when the client left early), and counted in
 * the metrics. The statement is logged at debug level only; parameter values never.
 */
@Injectable()
export class ExecuteRequestLog implements OnModuleInit {
  private readonly pending = new WeakMap<FastifyRequest, Pending>();
  private readonly defaultDatabase: string | undefined;
  private readonly log: Pino;
  /** The ends of queries this api recorded: a request's line waits for its query's. */
  private readonly ends = new QueryEnds();

  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Inject(SLUICE_CONFIG) config: SluiceConfig,
    lifecycle: QueryLifecycle,
    private readonly metrics: ApiMetricsService,
  ) {
    this.log = executeLineLogger(config);
    lifecycle.onEnd((queryId, record) => this.ends.told(queryId, record));
    const url = config.databaseUrl ? new URL(config.databaseUrl) : undefined;
    this.defaultDatabase = url ? decodeURIComponent(url.pathname.slice(1)) || undefined : undefined;
  }

  onModuleInit(): void {
    const fastify = this.adapterHost.httpAdapter.getInstance<FastifyInstance>();
    fastify.addHook('onRequest', (request, reply, done) => {
      if (isExecute(request)) {
        this.pending.set(request, {});
        reply.raw.once('close', () => void this.closed(request, reply));
      }
      done();
    });
    // Errors leave as an envelope: the query id (if any) and status are in it.
    fastify.addHook('onSend', (request, _reply, payload, done) => {
      const pending = this.pending.get(request);
      if (pending && typeof payload === 'string' && payload.length < 65_536) {
        try {
          pending.envelope = JSON.parse(payload) as ErrorEnvelope;
        } catch {
          // not an envelope
        }
      }
      done(null, payload);
    });
  }

  private async closed(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    let summary: ExecuteSummary | undefined;
    try {
      summary = await this.summarise(request, reply);
      this.metrics.observe(summary);
      this.write(summary, request);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'execute request not logged');
    } finally {
      this.pending.delete(request);
      requestTrace(request)?.finish(summary, reply.statusCode);
    }
  }

  private async summarise(request: FastifyRequest, reply: FastifyReply): Promise<ExecuteSummary> {
    const envelope = this.pending.get(request)?.envelope;
    const header = reply.getHeader('x-query-id');
    const queryId = typeof header === 'string' ? header : envelope?.query_id;
    const user = (request as FastifyRequest & { user?: AuthUser }).user;
    const base: ExecuteSummary = {
      queryId,
      user: user?.username,
      database: user?.database ?? this.defaultDatabase,
      httpStatus: reply.statusCode,
      sqlState: envelope?.status.sql_state,
      vendorCode: envelope?.status.vendor_code,
      rows: 0,
      bytes: 0,
      durationMs: Math.round(reply.elapsedTime),
      outcome: 'rejected',
    };
    // Fields are set on `base`, not spread into a new object: V8 builds a spread with fields
    // added on its slow path (µs a line).
    if (!queryId) return base;
    // Answered before its result: the query runs on, and its worker records its end.
    if (base.httpStatus === 202) {
      base.outcome = 'accepted';
      return base;
    }
    // The end this api recorded, as the registry holds it (whoever ended the query first).
    const record = await this.ends.ended(queryId, SETTLE_MS);
    if (!record || !isFinal(record.state)) {
      base.outcome = outcomeOfStatus(base.httpStatus, base.vendorCode);
      return base;
    }
    return {
      queryId,
      httpStatus: base.httpStatus,
      durationMs: base.durationMs,
      user: record.owner,
      database: record.database ?? base.database,
      format: record.format,
      lane: record.lane ?? 'interactive',
      outcome: record.state as ExecuteOutcome,
      sqlState: record.status?.sql_state ?? base.sqlState,
      vendorCode: record.status?.vendor_code ?? base.vendorCode,
      rows: record.rows,
      bytes: record.bytes,
      queueWaitMs: record.startedAt !== undefined ? record.startedAt - record.createdAt : undefined,
      runMs:
        record.startedAt !== undefined && record.finishedAt !== undefined
          ? record.finishedAt - record.startedAt
          : undefined,
    };
  }

  private write(summary: ExecuteSummary, request: FastifyRequest): void {
    this.log.info(
      {
        request_id: request.id,
        query_id: summary.queryId ?? null,
        user: summary.user ?? null,
        database: summary.database ?? null,
        format: summary.format ?? null,
        lane: summary.lane ?? null,
        outcome: summary.outcome,
        http_status: summary.httpStatus,
        sql_state: summary.sqlState ?? null,
        vendor_code: summary.vendorCode ?? null,
        rows: summary.rows,
        bytes: summary.bytes,
        duration_ms: summary.durationMs,
        queue_wait_ms: summary.queueWaitMs ?? null,
        run_ms: summary.runMs ?? null,
        trace_id: requestTrace(request)?.traceId ?? null,
      },
      'execute',
    );
    if (this.log.isLevelEnabled('debug')) {
      this.log.debug(
        {
          request_id: request.id,
          query_id: summary.queryId ?? null,
          statement: statementOf(request),
        },
        'execute statement',
      );
    }
  }
}
