import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import {
  ExecuteJobData,
  ResultRecord,
  SluiceError,
  Status,
  httpStatusOf,
  okStatus,
  statusOf,
} from '@app/contracts';
import { ExecuteRequestDto } from '@app/http-contracts';
import { SLUICE_CONFIG, SluiceConfig, isStandalone } from '@app/config';
import { QueryLifecycle } from '@app/execution';
import {
  JobQueue,
  QueryRegistry,
  ResultSource,
  ResultSpool,
  readingSpool,
  recordedStatement,
} from '@app/transport';
import { AuthUser } from '../auth/auth-user';
import { ExecutePolicyService } from '../auth/execute-policy.service';
import { ExecutionFailedError } from '../http/execution-failed.error';
import { ApiMetricsService } from '../metrics/api-metrics.service';
import { JOB_QUEUE, QUERY_REGISTRY, RESULT_SOURCE, RESULT_SPOOL } from '../infra/tokens';
import { AdmissionService } from './admission.service';
import { buildJob } from './execute.job';
import { Execution } from './execution';
import { ExecutionResponse } from './execution.response';
import { contentTypeOf } from './media.negotiator';
import { executionBody, lateFailureTail } from './execution.stream';
import { ClientGoneError, readToFirstBytes, readWithin } from './first-record';
import { ProducerWatch } from '../queries/producer.watch';
import { WorkerRosterService } from '../health/worker-roster.service';
import { KeptResultService } from '../queries/kept-result.service';
import { ownsQuery } from '../queries/query.owner';
import {
  ResponseOptions,
  ResultWait,
  negotiateRequest,
  requestFingerprint,
} from './request.negotiation';
import { bindStatement } from './statement.binding';
import type { RequestTrace } from '../tracing/request.trace';

/**
 * The body as one Buffer when the result ended within the records read so far (a small result
 * comes as one record): its end is recorded and the execution released before the response is
 * sent, in one write with its length instead of chunk by chunk. Released before, not as it goes:
 * a client at its per-user cap may send its next query at once, to another api (no sticky
 * sessions), whose admission must find the slot free; only Redis's answer says it will.
 */
async function bodyIfEnded(
  execution: Execution,
  read: ResultRecord[],
): Promise<Buffer | undefined> {
  const last = read[read.length - 1];
  if (last.kind !== 'end' || last.abort) return undefined;
  const bytes: Buffer[] = [];
  for (const record of read) {
    if (record.kind === 'error') return undefined;
    execution.sent(record);
    bytes.push(record.bytes);
  }
  // Issued together: one round trip for both.
  await Promise.all([execution.end(last.status), execution.close()]);
  return Buffer.concat(bytes);
}

/** Longest wait for the spool's answer at enqueue (ms). */
const SPOOL_CHECK_TIMEOUT_MS = 2000;
/** How long a spool that answered is taken as reachable (ms). */
const SPOOL_CHECK_HOLDS_MS = 5000;

/**
 * Validates and binds a statement, queues it, and turns the query's result channel into the
 * response body. Runs no SQL itself.
 */
@Injectable()
export class ExecuteService {
  private readonly logger = new Logger(ExecuteService.name);
  /** messaging.system of the enqueue spans: BullMQ, or standalone mode's in-process queue. */
  private readonly queueSystem: string;
  private readonly reading: ResultSource;
  /** The spool answered its check until then (epoch ms): kept queries are let through. */
  private spoolCheckedUntil = 0;

  constructor(
    @Inject(JOB_QUEUE) private readonly queue: JobQueue,
    @Inject(RESULT_SOURCE) private readonly results: ResultSource,
    private readonly lifecycle: QueryLifecycle,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    private readonly policy: ExecutePolicyService,
    private readonly admission: AdmissionService,
    private readonly workers: WorkerRosterService,
    private readonly watch: ProducerWatch,
    @Inject(QUERY_REGISTRY) private readonly registry: QueryRegistry,
    private readonly kept: KeptResultService,
    @Inject(RESULT_SPOOL) private readonly spool: ResultSpool | null,
    @Optional() private readonly metrics?: ApiMetricsService,
  ) {
    this.queueSystem = isStandalone(config) ? 'sluice_in_process' : 'bullmq';
    // A kept result waited for is read from its start, its spooled segments as its bytes.
    this.reading = readingSpool(results, spool);
  }

  async execute(
    given: Readonly<ExecuteRequestDto>,
    user: AuthUser,
    options: ResponseOptions,
  ): Promise<ExecutionResponse> {
    const negotiated = negotiateRequest(given, options);
    const { request, format, encoding } = negotiated;
    // Limits, role changes and CONNECT on the database: refused before anything is queued.
    await this.policy.check(request, user).catch((err: unknown) => {
      // A 503 of the checks (PostgreSQL out of reach for CONNECT) says when to retry, as all do.
      if (err instanceof SluiceError && err.http === 503 && !Object.keys(err.headers).length) {
        throw new SluiceError(err.code, err.message, err.sqlState, this.workers.retryAfter());
      }
      throw err;
    });
    const bound = bindStatement(request.statement, request.params);
    const queryId = randomUUID();
    const job = buildJob({ negotiated, queryId, bound, user, now: Date.now() }, this.config);
    if (job.kept?.spooled) await this.spoolReady();
    const { trace } = options;
    const execution = await this.admit(job, user, request.statement, {
      encoding: encoding?.name,
      trace,
    });
    const key = negotiated.idempotencyKey;
    if (key !== undefined) {
      const fingerprint = requestFingerprint(negotiated);
      const repeated = await this.claim(execution, job, user, {
        key,
        fingerprint,
        signal: options.signal,
      });
      if (repeated) return repeated;
    }
    if (trace) {
      await trace.enqueue(job, this.queueSystem, () => this.enqueue(execution, job, key));
    } else await this.enqueue(execution, job, key);
    const readAhead = await this.firstBytes(execution, options.signal, negotiated.wait);
    if (!readAhead) return this.accepted(execution);
    trace?.streaming(queryId);
    return {
      queryId,
      contentEncoding: encoding?.name,
      contentType: contentTypeOf(format),
      body:
        (await bodyIfEnded(execution, readAhead)) ??
        executionBody(execution, readAhead, lateFailureTail(job, this.config.maxEntryBytes)),
      close: () => execution.close(),
    };
  }

  /**
   * Refuses a kept query (503, Retry-After) while the spool cannot be written: its worker could
   * keep nothing. A success holds for a few seconds, so that the store is not asked per request;
   * the check is bounded in time (a store that does not answer is as good as gone).
   */
  private async spoolReady(): Promise<void> {
    if (!this.spool || Date.now() < this.spoolCheckedUntil) return;
    try {
      await this.spool.check(SPOOL_CHECK_TIMEOUT_MS);
      this.spoolCheckedUntil = Date.now() + SPOOL_CHECK_HOLDS_MS;
    } catch (err) {
      this.metrics?.spoolError('check');
      this.logger.warn((err as Error).message);
      throw new SluiceError(
        'UNAVAILABLE',
        'the store that keeps results (SLUICE_SPOOL_URL) is not reachable: a query whose result is kept cannot run now; retry later, or run it without wait_timeout to stream it',
        undefined,
        { 'Retry-After': String(SPOOL_CHECK_HOLDS_MS / 1000) },
      );
    }
  }

  /**
   * Admits the query, lists it in the registry, queued, and opens its execution; sets the job's
   * dispatch priority. Admission's checks come first; then the user's slot, the query's record
   * and its reader (whose alive key tells the worker that someone waits for the result) are asked
   * for in the same tick, so that they leave for Redis in one write: one round trip, and the
   * alive key is in Redis before the job can be taken. A query refused keeps none of them.
   */
  private async admit(
    job: ExecuteJobData,
    user: AuthUser,
    statement: string,
    options: { encoding: string | undefined; trace: RequestTrace | undefined },
  ): Promise<Execution> {
    const { encoding, trace } = options;
    if (trace) await trace.admission(job.lane, () => this.admission.check(job.lane));
    else await this.admission.check(job.lane);
    const asked = Promise.allSettled([
      this.admission.takeSlot(job.username, job.queryId),
      this.lifecycle.begin({
        queryId: job.queryId,
        owner: job.username,
        ownerId: user.userId,
        role: job.role,
        state: 'queued',
        database: job.database,
        format: job.format,
        encoding,
        kept: job.kept !== undefined,
        spooled: job.kept?.spooled,
        lane: job.lane,
        statement: recordedStatement(statement, this.config.recordStatementBytes),
        boundValues: job.values.length,
        createdAt: job.enqueuedAt,
        rows: 0,
        bytes: 0,
        traceId: trace?.traceId,
      }),
    ]);
    const open = () =>
      Execution.open(job, {
        results: this.reading,
        lifecycle: this.lifecycle,
        onSilence: this.watch.of(job, (queryId, status) => this.kept.failKept(queryId, status)),
      });
    // A kept result's reader writes no alive key (its query runs on without a reader) and reads
    // over a connection of its own: it is opened once the query is admitted, not for a refusal.
    const early = job.kept ? undefined : open();
    const [slot, record] = await asked;
    if (slot.status === 'fulfilled' && record.status === 'fulfilled') {
      job.priority = slot.value;
      if (early) return early;
      const execution = open();
      // Nobody reads a kept result while it waits: its slot, taken now, is held through the wait.
      if (job.startBy !== undefined) execution.holdSlotUntil(job.startBy);
      return execution;
    }
    await this.withdraw(job, early);
    if (slot.status === 'rejected') throw slot.reason;
    const reason = (record as PromiseRejectedResult).reason as Error;
    this.logger.error(`query ${job.queryId}: could not record it: ${reason.message}`);
    throw new SluiceError('UNAVAILABLE', 'the query queue is not reachable');
  }

  /**
   * Takes back a query that was admitted but will never be queued: its slot, its record and its
   * reader. A failure is logged and left: the slot lapses with its lease, the record with its TTL.
   */
  private async withdraw(job: ExecuteJobData, execution?: Execution): Promise<void> {
    const { queryId, username } = job;
    await Promise.all([
      this.lifecycle.withdraw({ queryId, owner: username }),
      execution?.detach(),
    ]).catch((err: Error) =>
      this.logger.warn(`query ${queryId}: could not withdraw it: ${err.message}`),
    );
  }

  /**
   * Claims the request's Idempotency-Key for the new query `job`. A key claimed already (by the
   * same user, within the TTL of kept results) answers the repeat with the query it stands for —
   * streamed while it runs, replayed once it ended — and the new query never runs; the same key
   * with another request is 422; a new key of a user who holds idempotencyKeysPerUser live
   * ones is 429.
   */
  private async claim(
    execution: Execution,
    job: ExecuteJobData,
    user: AuthUser,
    request: { key: string; fingerprint: string; signal: AbortSignal | undefined },
  ): Promise<ExecutionResponse | undefined> {
    const { key, fingerprint, signal } = request;
    const { queryId, username } = job;
    const limits = {
      ttlSeconds: this.config.resultTtlSeconds,
      most: this.config.idempotencyKeysPerUser,
    };
    let claimed;
    try {
      claimed = await this.registry.claimKey(
        { owner: username, key },
        { queryId, fingerprint },
        limits,
      );
    } catch (err) {
      await this.withdraw(job, execution);
      throw err;
    }
    if (claimed.outcome === 'claimed') return undefined;
    // Not run: the slot admission gave it goes back, and its record and reader go.
    await this.withdraw(job, execution);
    if (claimed.outcome === 'full') {
      const seconds = Math.max(1, Math.ceil(claimed.freeInMs / 1000));
      throw new SluiceError(
        'TOO_MANY_KEYS',
        `you hold ${limits.most} Idempotency-Keys from the last ${limits.ttlSeconds} s; retry in ${seconds} s, or without a key`,
        undefined,
        { 'Retry-After': String(seconds) },
      );
    }
    const held = claimed.claim;
    if (held.fingerprint !== fingerprint) {
      throw new SluiceError(
        'IDEMPOTENCY_CONFLICT',
        `Idempotency-Key "${key}" was used for another request (query ${held.queryId})`,
      );
    }
    const record = await this.registry.get(held.queryId);
    // A key of a deleted user's of the same name (not purged yet) is no key of this user's.
    if (!record || !ownsQuery(user, record)) {
      throw new SluiceError('RESULT_GONE', `the query of Idempotency-Key "${key}" is gone`);
    }
    return this.kept.fetch(record, undefined, signal);
  }

  /**
   * The answer to a request whose wait ended before its result: 202 with where to find the query
   * and, later, its result (kept for SLUICE_RESULT_TTL_SECONDS after its end).
   */
  private async accepted(execution: Execution): Promise<ExecutionResponse> {
    await execution.detach();
    const { queryId } = execution;
    // Not in the queue any more: a worker has it (its state may move on at any moment).
    const position = await this.queue.position(queryId).catch(() => undefined);
    const state = position === undefined ? 'running' : 'queued';
    const self = `/v1/queries/${queryId}`;
    const body = {
      query_id: queryId,
      state,
      queue_position: position ?? null,
      links: { self, result: `${self}/result` },
      status: okStatus(`accepted: the query is ${state}; its result will be at ${self}/result`),
    };
    return {
      queryId,
      httpStatus: 202,
      headers: { location: self },
      contentType: 'application/json; charset=utf-8',
      body: Buffer.from(JSON.stringify(body)),
      close: () => execution.close(),
    };
  }

  /** Queues the job of a query admitted and listed; a queue out of reach is a 503. */
  private async enqueue(execution: Execution, job: ExecuteJobData, idempotencyKey?: string) {
    try {
      await this.queue.enqueue(job);
    } catch (err) {
      this.logger.error(`query ${job.queryId}: could not enqueue: ${(err as Error).message}`);
      // Never queued: a retry with the same key must run it.
      if (idempotencyKey !== undefined) {
        await this.registry
          .releaseKey({ owner: job.username, key: idempotencyKey })
          .catch(() => undefined);
      }
      const error = new SluiceError('UNAVAILABLE', 'the query queue is not reachable');
      await execution.fail(error.toStatus());
      throw error;
    }
  }

  /**
   * The records up to the body's first bytes. A query that fails before them, a client that
   * leaves (its query is stopped) or a result channel that breaks is answered with the envelope
   * and its own HTTP code.
   */
  private async firstBytes(
    execution: Execution,
    signal: AbortSignal | undefined,
    wait: ResultWait | undefined,
  ): Promise<ResultRecord[] | undefined> {
    let read: ResultRecord[] | undefined;
    try {
      read = await (wait
        ? readWithin(execution, signal, wait.ms)
        : readToFirstBytes(execution, signal));
    } catch (err) {
      if (err instanceof ClientGoneError) {
        if (execution.keeps) {
          // Its result is kept: it runs on for the client to fetch. Nobody is left to answer.
          await execution.detach();
          throw new ExecutionFailedError(
            execution.queryId,
            499,
            statusOf('CANCELLED', 'client went away; the query runs on and keeps its result'),
          );
        }
        await this.stop(execution);
        return this.fail(execution, statusOf('CANCELLED', 'client went away'));
      }
      this.logger.error(
        `query ${execution.queryId}: result channel failed: ${(err as Error).message}`,
      );
      return this.fail(execution, statusOf('UNAVAILABLE', 'result channel unavailable'));
    }
    if (!read) {
      // The wait ended first: answered 202, or stopped if the request said so.
      if (wait?.onTimeout !== 'cancel') return undefined;
      await this.stop(execution);
      return this.fail(
        execution,
        statusOf('CANCELLED', `no result within wait_timeout (${wait.ms} ms): query cancelled`),
      );
    }
    const first = read[read.length - 1];
    // Ended before any byte of a body: answer with the envelope and the error's own code.
    if (first.kind === 'error') {
      execution.sent(first);
      return this.fail(execution, first.status);
    }
    return read;
  }

  /** Stops a query whose client is gone: unqueue it, or tell its worker. */
  private async stop(execution: Execution): Promise<void> {
    // Not removed (or not known): it may be running, so the cancel covers it.
    if (await this.queue.removeQueued(execution.queryId).catch(() => false)) return;
    await execution.cancel();
  }

  /** Ends an execution whose response did not start, and answers with `status`. */
  private async fail(execution: Execution, status: Status): Promise<never> {
    await execution.fail(status);
    const http = httpStatusOf(status);
    // Every 503 says when to try again.
    const headers: Record<string, string> = http === 503 ? this.workers.retryAfter() : {};
    throw new ExecutionFailedError(execution.queryId, http, status, headers);
  }
}
