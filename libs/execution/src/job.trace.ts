import { Span, SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { ExecuteJobData, LANE_QUEUES } from '@app/contracts';
import type { TracingSettings } from '@app/config';
import { carrierOf, contextOf, setQueryStatus, tracingOn } from '@app/tracing';
import type { TaskTrace } from './tasks/execute-query.task';
import type { ExecutionOutcome } from './tasks/query.runner';

const tracer = () => trace.getTracer('sluice');

/** The statement's first keyword, upper-cased: `db.operation.name` (WITH, SELECT, INSERT…). */
export function operationOf(text: string): string | undefined {
  const stripped = text.replace(/^(\s+|--[^\n]*\n?|\/\*[\s\S]*?\*\/)+/, '');
  return /^[A-Za-z]+/.exec(stripped)?.[0].toUpperCase();
}

/**
 * The spans of one job on the side that runs it (a worker, or standalone mode's api): the job
 * taken (consumer, a child of the api's enqueue span carried in the job's data), its wait in the
 * queue, the statement on PostgreSQL (client) and the result's encoding. The thread measures its
 * phases (StatementClock) and hands them back with its outcome: spans are made here, on the
 * main thread, whose SDK exports them; the threads load none.
 */
export class JobTrace {
  private statementSpan?: Span;

  private constructor(
    private readonly job: ExecuteJobData,
    private readonly consumer: Span,
    private readonly settings: Pick<TracingSettings, 'statements' | 'sqlcommenter'>,
    private readonly database: string | undefined,
  ) {}

  /**
   * The job taken off `system`'s queue, or undefined when it carries no trace (tracing off
   * at the api, or not sampled) or this process exports none.
   */
  static taken(
    job: ExecuteJobData,
    options: { system: string; settings?: TracingSettings; database?: string },
  ): JobTrace | undefined {
    const { settings } = options;
    if (!job.trace || !settings || !tracingOn()) return undefined;
    const parent = contextOf(job.trace);
    const queue = LANE_QUEUES[job.lane];
    const now = Date.now();
    const messaging = {
      'messaging.system': options.system,
      'messaging.destination.name': queue,
      'messaging.message.id': job.queryId,
      'sluice.query_id': job.queryId,
      'sluice.lane': job.lane,
    };
    // Its wait: from the enqueue to now, beside the consumer span (a child may not start first).
    tracer()
      .startSpan(
        'queue wait',
        { kind: SpanKind.INTERNAL, startTime: job.enqueuedAt, attributes: messaging },
        parent,
      )
      .end(now);
    const consumer = tracer().startSpan(
      `process ${queue}`,
      {
        kind: SpanKind.CONSUMER,
        startTime: now,
        attributes: {
          ...messaging,
          'messaging.operation.type': 'process',
          'messaging.operation.name': 'process',
          'sluice.queue_wait_ms': Math.max(0, now - job.enqueuedAt),
        },
      },
      parent,
    );
    return new JobTrace(job, consumer, settings, job.database ?? options.database);
  }

  /** The query's trace id, as the consumer span has it. */
  get traceId(): string {
    return this.consumer.spanContext().traceId;
  }

  /**
   * Starts the statement's span as the task leaves for its thread; the task gets its traceparent
   * when the statement is to carry it (SLUICE_TRACE_SQLCOMMENTER).
   */
  statement(): TaskTrace {
    const operation = operationOf(this.job.text);
    const span = tracer().startSpan(
      operation ?? 'postgresql',
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'db.system.name': 'postgresql',
          ...(this.database !== undefined ? { 'db.namespace': this.database } : {}),
          ...(operation ? { 'db.operation.name': operation } : {}),
          // Placeholders only ($1, $2): the bound values never go into a span.
          ...(this.settings.statements ? { 'db.query.text': this.job.text } : {}),
          'sluice.query_id': this.job.queryId,
        },
      },
      trace.setSpan(context.active(), this.consumer),
    );
    this.statementSpan = span;
    const traceparent = this.settings.sqlcommenter
      ? carrierOf(trace.setSpan(context.active(), span))?.traceparent
      : undefined;
    return traceparent ? { traceparent } : {};
  }

  /** Ends the spans with the run's outcome and the times its thread measured. */
  finished(outcome: ExecutionOutcome | undefined): void {
    const end = Date.now();
    const span = this.statementSpan;
    const timings = outcome?.timings;
    if (span) {
      if (outcome) {
        span.setAttribute('db.response.returned_rows', outcome.rows);
        setQueryStatus(span, outcome.status);
      }
      span.end(timings?.statementEndAt ?? end);
      if (timings?.firstRowsAt !== undefined && outcome) {
        tracer()
          .startSpan(
            'encode result',
            {
              kind: SpanKind.INTERNAL,
              startTime: timings.firstRowsAt,
              attributes: {
                'sluice.format': this.job.format,
                'sluice.rows': outcome.rows,
                'sluice.bytes': outcome.bytes,
                'sluice.encode_ms': Math.round(timings.encodeMs * 1000) / 1000,
              },
            },
            trace.setSpan(context.active(), span),
          )
          .end(timings.endAt ?? end);
      }
    }
    if (outcome) {
      this.consumer.setAttributes({ 'sluice.rows': outcome.rows, 'sluice.bytes': outcome.bytes });
      setQueryStatus(this.consumer, outcome.status);
    } else {
      for (const open of [span, this.consumer]) {
        open?.setStatus({ code: SpanStatusCode.ERROR, message: 'the job failed in the pool' });
      }
    }
    this.consumer.end(end);
  }
}
