import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  ERROR_CATALOGUE,
  ExecuteJobData,
  ExecuteRequestDto,
  MEDIA_TYPES,
  ResultFormat,
  ResultRecord,
  SluiceError,
  Status,
  httpStatusOf,
} from '@app/contracts';
import { SUPPORTED_FORMATS } from '@app/formats';
import { InvalidParameterError, MissingParameterError, bindPlaceholders } from '@app/sql';
import { JobQueue, ResultReader, ResultSource } from '@app/transport';
import { AuthUser } from '../auth/auth-user';
import { ExecutionFailedError } from '../http/execution-failed.error';
import { JOB_QUEUE, RESULT_SOURCE } from '../infra/tokens';
import { CompressionHeaders, negotiateEncoding } from './encoding.negotiator';
import { negotiateFormat } from './media.negotiator';

const TEXT_FORMATS = new Set<ResultFormat>(['json', 'ndjson', 'csv']);

/** How the client asked for the response. */
export interface ResponseOptions extends CompressionHeaders {
  accept?: string;
  /** Database named in the path (`/v1/execute/{database}`). */
  database?: string;
}

/** A started execution: its streamed body. */
export interface ExecutionResponse {
  queryId: string;
  contentType: string;
  contentEncoding?: string;
  body: Readable;
}

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
    const bound = this.bind(request);
    const queryId = randomUUID();
    const job: ExecuteJobData = {
      queryId,
      text: bound.text,
      values: bound.values,
      types: bound.types,
      username: user.username,
      role: user.role,
      readOnly: user.readOnly,
      database: request.database ?? user.database,
      schema: request.schema,
      format,
      layout: request.format ?? 'array',
      fetchSize: request.fetch_size ?? 0,
      maxRows: request.max_rows,
      encoding,
      enqueuedAt: Date.now(),
    };
    const reader = this.results.open(queryId, this.producerWatch(queryId));
    try {
      await this.queue.enqueue(job);
    } catch (err) {
      await reader.close().catch(() => undefined);
      this.logger.error(`query ${queryId}: could not enqueue: ${(err as Error).message}`);
      throw new SluiceError('UNAVAILABLE', 'the query queue is not reachable');
    }
    let first: ResultRecord;
    try {
      first = await reader.next();
    } catch (err) {
      await reader.close().catch(() => undefined);
      this.logger.error(`query ${queryId}: result channel failed: ${(err as Error).message}`);
      const entry = ERROR_CATALOGUE.UNAVAILABLE;
      return this.failure(queryId, {
        reason: 'result channel unavailable',
        sql_state: entry.sqlState,
        vendor_code: entry.vendorCode,
      });
    }
    if (first.kind === 'error' || first.kind === 'end') {
      // Ended before any byte of a body: answer with the envelope and the error's own code.
      await reader.close().catch(() => undefined);
      if (first.kind === 'error') return this.failure(queryId, first.status);
    }
    return {
      queryId,
      contentEncoding: encoding?.name,
      contentType: TEXT_FORMATS.has(format)
        ? `${MEDIA_TYPES[format]}; charset=utf-8`
        : MEDIA_TYPES[format],
      body: Readable.from(this.body(first, reader), { objectMode: false }),
    };
  }

  private failure(queryId: string, status: Status): never {
    throw new ExecutionFailedError(queryId, httpStatusOf(status), status);
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

  /** Yields the body bytes record by record; a failure the format cannot carry aborts it. */
  private async *body(first: ResultRecord, reader: ResultReader): AsyncGenerator<Buffer> {
    let record = first;
    let finished = false;
    try {
      for (;;) {
        switch (record.kind) {
          case 'head':
          case 'data':
            if (record.bytes.length > 0) yield record.bytes;
            break;
          case 'end':
            if (record.abort) throw new Error(`query failed mid-stream: ${record.status.reason}`);
            if (record.bytes.length > 0) yield record.bytes;
            finished = true;
            return;
          case 'error':
            throw new Error(`query failed mid-stream: ${record.status.reason}`);
        }
        record = await reader.next();
      }
    } finally {
      // Reached when the client went away, too: stop the producer.
      if (!finished) await reader.cancel().catch(() => undefined);
      await reader.close().catch(() => undefined);
    }
  }

  /** Asked when a stream goes quiet: is the job still queued or running? */
  private producerWatch(queryId: string): () => Promise<ResultRecord | undefined> {
    let endedOnce = false;
    return async () => {
      const state = await this.queue.state(queryId);
      if (state === 'queued' || state === 'active') return undefined;
      // The job ended; its final record may have been written just after our last read.
      if (!endedOnce) {
        endedOnce = true;
        return undefined;
      }
      const entry = ERROR_CATALOGUE.WORKER_LOST;
      this.logger.warn(`query ${queryId}: job is ${state} but its stream ended without a status`);
      return {
        kind: 'error',
        status: { reason: entry.reason, sql_state: entry.sqlState, vendor_code: entry.vendorCode },
      };
    };
  }
}
