import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  ExecuteJobData,
  ExecuteRequestDto,
  MEDIA_TYPES,
  ResultFormat,
  ResultRecord,
  SluiceError,
  Status,
  httpStatusOf,
  statusOf,
} from '@app/contracts';
import { SUPPORTED_FORMATS, createEncoder } from '@app/formats';
import { InvalidParameterError, MissingParameterError, bindPlaceholders } from '@app/sql';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { QueryLifecycle } from '@app/execution';
import { JobQueue, ResultReader, ResultSource } from '@app/transport';
import { AuthUser } from '../auth/auth-user';
import { ExecutePolicyService } from '../auth/execute-policy.service';
import { ExecutionFailedError } from '../http/execution-failed.error';
import { JOB_QUEUE, RESULT_SOURCE } from '../infra/tokens';
import { AdmissionService } from './admission.service';
import { ExecutionStream, LateFailureTail } from './execution.stream';
import { ExecutionTracker } from './execution.tracker';
import { CompressionHeaders, negotiateEncoding } from './encoding.negotiator';
import { negotiateFormat } from './media.negotiator';

const TEXT_FORMATS = new Set<ResultFormat>(['json', 'ndjson', 'csv']);

/** The client left before its response started. */
class ClientGoneError extends Error {}

/** How the client asked for the response. */
export interface ResponseOptions extends CompressionHeaders {
  accept?: string;
  /** Aborted when the client goes away. */
  signal?: AbortSignal;
  /** Database named in the path (`/v1/execute/{database}`). */
  database?: string;
}

/** A started execution: its streamed body. */
export interface ExecutionResponse {
  queryId: string;
  contentType: string;
  contentEncoding?: string;
  body: Readable;
  /**
   * Releases what the execution holds (and cancels the query unless it ended); idempotent. The
   * response's close event must call it: a body destroyed before its first read never runs.
   */
  close(): Promise<void>;
}

/** A worker that took a job and stopped renewing its lock is gone: what its client is told. */
const WORKER_LOST_REASON = 'the worker running the query stopped; the query was not retried';

/**
 * Validates and binds a statement, queues it, and turns the query's result channel into the
 * response body. Runs no SQL itself.
 */
@Injectable()
export class ExecuteService {
  private readonly logger = new Logger(ExecuteService.name);

  constructor(
    @Inject(JOB_QUEUE) private readonly queue: JobQueue,
    @Inject(RESULT_SOURCE) private readonly results: ResultSource,
    private readonly lifecycle: QueryLifecycle,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    private readonly policy: ExecutePolicyService,
    private readonly admission: AdmissionService,
  ) {}

  async execute(
    given: Readonly<ExecuteRequestDto>,
    user: AuthUser,
    options: ResponseOptions,
  ): Promise<ExecutionResponse> {
    const request = { ...given };
    if (options.database !== undefined) {
      if (request.database !== undefined && request.database !== options.database) {
        throw new SluiceError('INVALID_REQUEST', 'database in the path and in the body differ');
      }
      request.database = options.database;
    }
    const format = negotiateFormat(options.accept, SUPPORTED_FORMATS);
    if (!format) {
      throw new SluiceError(
        'NOT_ACCEPTABLE',
        `cannot produce ${options.accept}; supported: ${SUPPORTED_FORMATS.map((f) => MEDIA_TYPES[f]).join(', ')}`,
      );
    }
    const encoding = negotiateEncoding(options);
    // Limits, role changes and CONNECT on the database: refused before anything is queued.
    await this.policy.check(request, user);
    const bound = this.bind(request);
    const queryId = randomUUID();
    const now = Date.now();
    const priority = await this.admission.admit(user.username, queryId);
    const tracker = new ExecutionTracker(this.lifecycle, queryId, user.username);
    const job: ExecuteJobData = {
      queryId,
      text: bound.text,
      values: bound.values,
      types: bound.types,
      username: user.username,
      role: user.role,
      readOnly: user.readOnly,
      session: user.session,
      database: request.database ?? user.database,
      schema: request.schema,
      format,
      layout: request.format ?? 'array',
      fetchSize: request.fetch_size ?? 0,
      maxRows: request.max_rows,
      encoding,
      timeoutMs: this.timeoutFor(request.timeout),
      startBy: now + this.config.maxQueueWaitMs,
      priority,
      enqueuedAt: now,
    };
    const reader = this.results.open(queryId, {
      onSilence: this.producerWatch(job),
      // The owner's slot lives as long as this reader does (and lapses soon after a lost release).
      onBeat: () => tracker.keepSlot(),
    });
    try {
      await this.lifecycle.begin({
        queryId,
        owner: user.username,
        state: 'queued',
        database: job.database,
        format,
        statement: request.statement.slice(0, 200),
        createdAt: now,
        rows: 0,
        bytes: 0,
      });
      await this.queue.enqueue(job);
    } catch (err) {
      await this.release(queryId, reader);
      this.logger.error(`query ${queryId}: could not enqueue: ${(err as Error).message}`);
      const error = new SluiceError('UNAVAILABLE', 'the query queue is not reachable');
      await tracker.end(error.toStatus());
      throw error;
    }
    // The status line goes out with the first byte of the body: until then, an error is still
    // answered with the envelope and its own HTTP code.
    const early: ResultRecord[] = [];
    let first: ResultRecord;
    try {
      first = await this.firstRecord(job, reader, options.signal);
      while ((first.kind === 'head' || first.kind === 'data') && first.bytes.length === 0) {
        early.push(first);
        first = await this.firstRecord(job, reader, options.signal);
      }
    } catch (err) {
      await this.release(queryId, reader);
      const status =
        err instanceof ClientGoneError
          ? statusOf('CANCELLED', 'client went away')
          : statusOf('UNAVAILABLE', 'result channel unavailable');
      if (!(err instanceof ClientGoneError)) {
        this.logger.error(`query ${queryId}: result channel failed: ${(err as Error).message}`);
      }
      await tracker.end(status);
      return this.failure(queryId, status);
    }
    if (first.kind === 'error') {
      // Ended before any byte of a body: answer with the envelope and the error's own code.
      await this.release(queryId, reader);
      await tracker.end(first.status);
      return this.failure(queryId, first.status);
    }
    const stream = new ExecutionStream(
      queryId,
      [...early, first],
      reader,
      tracker,
      this.lateFailureTail(job),
    );
    return {
      queryId,
      contentEncoding: encoding?.name,
      contentType: TEXT_FORMATS.has(format)
        ? `${MEDIA_TYPES[format]}; charset=utf-8`
        : MEDIA_TYPES[format],
      body: stream.body,
      close: () => stream.close(),
    };
  }

  /** Releases a reader on a path where no body was started. */
  private async release(queryId: string, reader: ResultReader): Promise<void> {
    await reader.close().catch((err: Error) =>
      // Repaired by Redis: the alive key lapses within seconds, the stream at its TTL.
      this.logger.warn(`query ${queryId}: could not release its result reader: ${err.message}`),
    );
  }

  /**
   * How a body that started ends when the api finds the failure itself (the worker was lost): a
   * JSON or NDJSON body gets its status in-band, as the worker would have written it — unless it
   * is compressed (the worker's compressor held the state) or its last entry was not a whole
   * chunk (a chunk larger than an entry is split over several, all but the last exactly
   * SLUICE_MAX_ENTRY_BYTES long). Any other body is aborted.
   */
  private lateFailureTail(job: ExecuteJobData): LateFailureTail {
    const { format } = job;
    if (job.encoding || (format !== 'json' && format !== 'ndjson')) return () => null;
    const encoder = createEncoder(format, {
      queryId: job.queryId,
      layout: job.layout,
      columns: [],
    });
    // Where a whole chunk of each format ends: a line; the data array's opening or a row.
    const wholeEnds = format === 'ndjson' ? ['\n'] : ['[', ']', '}'];
    return (status, lastSent) => {
      const last = String.fromCharCode(lastSent[lastSent.length - 1] ?? 0);
      if (lastSent.length >= this.config.maxEntryBytes || !wholeEnds.includes(last)) return null;
      return encoder.end(status, true);
    };
  }

  /** The statement's time limit: the request's, capped by the maximum, or the server default. */
  private timeoutFor(requested: number | undefined): number | undefined {
    const ms = requested ?? this.config.statementTimeoutMs;
    if (!ms) return undefined;
    return Math.min(ms, this.config.maxStatementTimeoutMs);
  }

  /** Waits for the first record; a client that leaves meanwhile cancels the query. */
  private async firstRecord(
    job: ExecuteJobData,
    reader: ResultReader,
    signal?: AbortSignal,
  ): Promise<ResultRecord> {
    if (!signal) return reader.next();
    const gone = new Promise<never>((_, reject) => {
      const onAbort = () => reject(new ClientGoneError());
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      return await Promise.race([reader.next(), gone]);
    } catch (err) {
      if (err instanceof ClientGoneError) await this.stop(job.queryId, reader);
      throw err;
    }
  }

  /** Stops a query whose client is gone: unqueue it, or tell its worker. */
  private async stop(queryId: string, reader: ResultReader): Promise<void> {
    // Not removed (or not known): it may be running, so the cancel below covers it.
    if (await this.queue.removeQueued(queryId).catch(() => false)) return;
    await reader.cancel().catch((err: Error) =>
      // Repaired by the caller's close(): the worker stops once the reader's alive key is gone.
      this.logger.warn(`query ${queryId}: could not send its cancel: ${err.message}`),
    );
  }

  private failure(queryId: string, status: Status): never {
    const http = httpStatusOf(status);
    // Every 503 says when to try again.
    const headers: Record<string, string> = http === 503 ? this.admission.retryAfter() : {};
    throw new ExecutionFailedError(queryId, http, status, headers);
  }

  private bind(request: Readonly<ExecuteRequestDto>) {
    try {
      return bindPlaceholders(request.statement, request.params);
    } catch (err) {
      if (err instanceof MissingParameterError) {
        throw new SluiceError('MISSING_PARAMETER', `no value for parameter {${err.parameter}}`);
      }
      if (err instanceof InvalidParameterError) {
        throw new SluiceError('INVALID_REQUEST', err.message);
      }
      throw err;
    }
  }

  /** Asked when a stream goes quiet: is the job still queued or running, and in time? */
  private producerWatch(job: ExecuteJobData): () => Promise<ResultRecord | undefined> {
    let endedOnce = false;
    return async () => {
      const state = await this.queue.state(job.queryId);
      switch (state) {
        case 'queued': {
          // Past its latest start, or no worker left to take it (the last one died after it was
          // queued): it will not run, so it need not wait for the queue limit.
          const late = job.startBy !== undefined && Date.now() > job.startBy;
          if (!late && (await this.admission.workerAlive())) return undefined;
          if (!(await this.queue.removeQueued(job.queryId))) return undefined;
          const status = late
            ? statusOf('TIME_LIMIT', 'query waited too long in the queue')
            : this.admission.noWorker().toStatus();
          return { kind: 'error', status };
        }
        case 'active':
          // A worker holds the job and renews its hold: running, however long it is quiet.
          return undefined;
        case 'lost':
          // Its worker died, and no other worker may be left to notice: end the query now. It is
          // never run again: the next worker's stalled check fails the job (maxStalledCount 0)
          // without handing it to the processor, and attempts 1 allows no retry.
          this.logger.warn(`query ${job.queryId}: the worker that took it is gone`);
          return { kind: 'error', status: statusOf('WORKER_LOST', WORKER_LOST_REASON) };
        default:
          // The job ended; its final record may have been written just after our last read.
          if (!endedOnce) {
            endedOnce = true;
            return undefined;
          }
          this.logger.warn(
            `query ${job.queryId}: job is ${state} but its stream ended without a status`,
          );
          return { kind: 'error', status: statusOf('WORKER_LOST') };
      }
    };
  }
}
