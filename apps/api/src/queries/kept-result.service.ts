import { Inject, Injectable } from '@nestjs/common';
import { Readable } from 'node:stream';
import {
  FINAL_STATES,
  MEDIA_TYPES,
  ResultFormat,
  ResultRecord,
  SluiceError,
  httpStatusOf,
  statusOf,
} from '@app/contracts';
import { QueryRecord, QueryRegistry, ResultReader, ResultSource } from '@app/transport';
import { ExecutionResponse } from '../execute/execution.response';
import { ExecutionFailedError } from '../http/execution-failed.error';
import { QUERY_REGISTRY, RESULT_SOURCE } from '../infra/tokens';

const TEXT_FORMATS = new Set<string>(['json', 'ndjson', 'csv']);

/** `bytes=N-` (the one form a resumed download sends); undefined for anything else. */
export function rangeStart(header: string | undefined): number | undefined {
  const match = /^bytes=(\d{1,15})-$/.exec(header?.trim() ?? '');
  return match ? Number(match[1]) : undefined;
}

/**
 * The kept result of an asynchronous query, as its owner fetches it (GET
 * /v1/queries/{id}/result): the body's bytes exactly as the query's own response would have
 * sent them, in its format and compression, from the start — while the query still runs, as they
 * come. A finished query's result also answers `Range: bytes=N-` with 206 from byte N.
 */
@Injectable()
export class KeptResultService {
  constructor(
    @Inject(QUERY_REGISTRY) private readonly registry: QueryRegistry,
    @Inject(RESULT_SOURCE) private readonly results: ResultSource,
  ) {}

  async fetch(record: QueryRecord, range: string | undefined): Promise<ExecutionResponse> {
    const { queryId } = record;
    if (!record.kept) {
      throw new SluiceError(
        'NOT_FOUND',
        `query ${queryId} keeps no result: only a query sent with wait_timeout (or Prefer: respond-async) does`,
      );
    }
    const finished = FINAL_STATES.includes(record.state);
    if (finished && !(await this.results.kept(queryId))) {
      throw new SluiceError('RESULT_GONE', `the result of query ${queryId} is no longer kept`);
    }
    const reader = this.results.openKept(queryId, {
      onSilence: () => this.endedMeanwhile(queryId),
    });
    const format = record.format as ResultFormat;
    const response: ExecutionResponse = {
      queryId,
      contentType: TEXT_FORMATS.has(format)
        ? `${MEDIA_TYPES[format]}; charset=utf-8`
        : MEDIA_TYPES[format],
      contentEncoding: record.encoding,
      headers: { 'accept-ranges': 'bytes' },
      body: Buffer.alloc(0),
      close: () => reader.close(),
    };
    try {
      const start = finished ? rangeStart(range) : undefined;
      if (start === undefined) {
        const first = await reader.next();
        if (first.kind === 'error') return this.failed(queryId, first, reader);
        return { ...response, body: Readable.from(bodyOf(reader, first)) };
      }
      const whole = await readAll(reader);
      await reader.close();
      if (start >= whole.length) {
        return {
          ...response,
          httpStatus: 416,
          headers: { ...response.headers, 'content-range': `bytes */${whole.length}` },
        };
      }
      return {
        ...response,
        httpStatus: 206,
        headers: {
          ...response.headers,
          'content-range': `bytes ${start}-${whole.length - 1}/${whole.length}`,
        },
        body: whole.subarray(start),
      };
    } catch (err) {
      await reader.close();
      throw err;
    }
  }

  /** A query that ended with an error before any byte: its envelope, with its own HTTP code. */
  private async failed(
    queryId: string,
    record: Extract<ResultRecord, { kind: 'error' }>,
    reader: ResultReader,
  ): Promise<never> {
    await reader.close();
    throw new ExecutionFailedError(queryId, httpStatusOf(record.status), record.status);
  }

  /** Asked when the result is quiet: a query that ended without a last record ends the body. */
  private async endedMeanwhile(queryId: string): Promise<ResultRecord | undefined> {
    const record = await this.registry.get(queryId);
    if (record && !FINAL_STATES.includes(record.state)) return undefined;
    const status = record?.status ?? statusOf('RESULT_GONE', 'the result is no longer kept');
    return { kind: 'end', status, bytes: Buffer.alloc(0), abort: true };
  }
}

/** The body from its first record on; a result that cannot end well is aborted. */
async function* bodyOf(reader: ResultReader, first: ResultRecord): AsyncGenerator<Buffer> {
  try {
    for (let record = first; ; record = await reader.next()) {
      if (record.kind === 'error') throw new Error(`query failed: ${record.status.reason}`);
      if (record.bytes.length > 0) yield record.bytes;
      if (record.kind === 'end') {
        if (record.abort) throw new Error(`query failed mid-stream: ${record.status.reason}`);
        return;
      }
    }
  } finally {
    await reader.close();
  }
}

/** Every byte of a finished query's kept result. */
async function readAll(reader: ResultReader): Promise<Buffer> {
  const parts: Buffer[] = [];
  for (;;) {
    const record = await reader.next();
    if (record.kind === 'error') break;
    parts.push(record.bytes);
    if (record.kind === 'end') break;
  }
  return Buffer.concat(parts);
}
