import { Context, Span, SpanKind, SpanStatusCode, TraceFlags, trace } from '@opentelemetry/api';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { IncomingMessage } from 'node:http';
import { ExecuteJobData, LANE_QUEUES } from '@app/contracts';
import { carrierOf, contextOf, setQueryStatus } from '@app/tracing';
import type { ExecuteSummary } from '../logging/execute.summary';

const tracer = () => trace.getTracer('sluice');

/**
 * The spans one execute request makes in the api: the HTTP server span (continuing the
 * request's W3C traceparent and tracestate, else the root of a new trace), admission, the
 * enqueue (producer, whose context the job carries to its worker) and the stream of the result
 * back to the client. Made only while tracing is on (installRequestTracing).
 */
export class RequestTrace {
  private stream?: Span;
  private closedAt?: number;
  private readonly context: Context;

  constructor(private readonly server: Span) {
    this.context = trace.setSpan(contextOf(undefined), server);
  }

  /** The trace id, when this request's trace is sampled (exported): only then worth naming. */
  get traceId(): string | undefined {
    const context = this.server.spanContext();
    return context.traceFlags & TraceFlags.SAMPLED ? context.traceId : undefined;
  }

  /** Runs admission's checks in a span of their own. */
  async admission<T>(lane: string, check: () => Promise<T>): Promise<T> {
    const span = tracer().startSpan(
      'admission',
      { kind: SpanKind.INTERNAL, attributes: { 'sluice.lane': lane } },
      this.context,
    );
    try {
      return await check();
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).name });
      throw err;
    } finally {
      span.end();
    }
  }

  /** Enqueues `job` in a producer span whose context the job carries (job.trace). */
  async enqueue(job: ExecuteJobData, system: string, send: () => Promise<void>): Promise<void> {
    const queue = LANE_QUEUES[job.lane];
    const span = tracer().startSpan(
      `send ${queue}`,
      {
        kind: SpanKind.PRODUCER,
        attributes: {
          'messaging.system': system,
          'messaging.operation.type': 'send',
          'messaging.operation.name': 'send',
          'messaging.destination.name': queue,
          'messaging.message.id': job.queryId,
          'sluice.query_id': job.queryId,
        },
      },
      this.context,
    );
    job.trace = carrierOf(trace.setSpan(this.context, span));
    try {
      await send();
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).name });
      throw err;
    } finally {
      span.end();
    }
  }

  /** The result's first bytes are on their way to the client: the stream back starts. */
  streaming(queryId: string): void {
    this.server.setAttribute('sluice.query_id', queryId);
    this.stream ??= tracer().startSpan(
      'stream result',
      { kind: SpanKind.INTERNAL, attributes: { 'sluice.query_id': queryId } },
      this.context,
    );
  }

  /** The response closed (sent whole, or the client left). */
  closed(): void {
    this.closedAt ??= Date.now();
  }

  /** Ends the spans with what the request log learnt of the request (nothing: it could not). */
  finish(summary: ExecuteSummary | undefined, statusCode: number): void {
    const end = this.closedAt ?? Date.now();
    this.server.setAttribute('http.response.status_code', statusCode);
    if (summary) {
      if (summary.queryId) this.server.setAttribute('sluice.query_id', summary.queryId);
      this.server.setAttributes({
        'sluice.outcome': summary.outcome,
        'sluice.rows': summary.rows,
        'sluice.bytes': summary.bytes,
      });
      if (summary.vendorCode !== undefined && summary.sqlState !== undefined) {
        this.server.setAttributes({
          'sluice.vendor_code': summary.vendorCode,
          'sluice.sql_state': summary.sqlState,
        });
      }
      if (this.stream) {
        setQueryStatus(
          this.stream,
          summary.vendorCode !== undefined && summary.sqlState !== undefined
            ? { reason: '', sql_state: summary.sqlState, vendor_code: summary.vendorCode }
            : undefined,
        );
        this.stream.setAttributes({ 'sluice.rows': summary.rows, 'sluice.bytes': summary.bytes });
      }
    }
    this.stream?.end(end);
    // HTTP semantic conventions: a server span is an error for 5xx only.
    if (statusCode >= 500) {
      this.server.setAttribute('error.type', String(statusCode));
      this.server.setStatus({ code: SpanStatusCode.ERROR });
    }
    this.server.end(end);
  }
}

const traces = new WeakMap<IncomingMessage, RequestTrace>();

/** The trace of an execute request, when tracing is on. */
export function requestTrace(request: FastifyRequest): RequestTrace | undefined {
  return traces.get(request.raw);
}

function isExecute(request: FastifyRequest): boolean {
  return request.routeOptions.url?.startsWith('/v1/execute') === true;
}

/**
 * Starts the HTTP server span of each execute request, first of all hooks. Installed only while
 * tracing is on: otherwise no request pays for it.
 */
export function installRequestTracing(fastify: FastifyInstance): void {
  fastify.addHook('onRequest', (request, reply, done) => {
    if (isExecute(request)) {
      const { traceparent, tracestate } = request.headers;
      const parent = contextOf(
        typeof traceparent === 'string'
          ? { traceparent, tracestate: typeof tracestate === 'string' ? tracestate : undefined }
          : undefined,
      );
      const route = request.routeOptions.url ?? '/v1/execute';
      const span = tracer().startSpan(
        `${request.method} ${route}`,
        {
          kind: SpanKind.SERVER,
          attributes: {
            'http.request.method': request.method,
            'http.route': route,
            'url.path': request.url.split('?')[0],
            'url.scheme': request.protocol,
            'client.address': request.ip,
            ...(request.headers['user-agent']
              ? { 'user_agent.original': request.headers['user-agent'] }
              : {}),
          },
        },
        parent,
      );
      const traced = new RequestTrace(span);
      traces.set(request.raw, traced);
      reply.raw.once('close', () => traced.closed());
    }
    done();
  });
}
