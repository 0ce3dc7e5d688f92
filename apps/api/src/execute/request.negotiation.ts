import { createHash } from 'node:crypto';
import type { RequestTrace } from '../tracing/request.trace';
import {
  Lane,
  ContentEncoding,
  MEDIA_TYPES,
  ParquetCompression,
  ResultFormat,
  SluiceError,
} from '@app/contracts';
import { ExecuteRequestDto, OnWaitTimeout } from '@app/http-contracts';
import { SUPPORTED_FORMATS } from '@app/formats';
import { CompressionHeaders, negotiateEncoding } from './encoding.negotiator';
import { laneOf } from './lane';
import { negotiateFormat, negotiateParquetCompression } from './media.negotiator';

/** How the client asked for the response. */
export interface ResponseOptions extends CompressionHeaders {
  accept?: string;
  /** Aborted when the client goes away. */
  signal?: AbortSignal;
  /** Database named in the path (`/v1/execute/{database}`). */
  database?: string;
  /** The Prefer header (RFC 7240): `respond-async`, `wait=<seconds>`. */
  prefer?: string;
  /** Idempotency-Key: a repeat of the request attaches to the query the key stands for. */
  idempotencyKey?: string;
  /** The request's spans, while tracing is on. */
  trace?: RequestTrace;
}

/** How long a request waits for its first result bytes before it is answered 202. */
export interface ResultWait {
  ms: number;
  /** The query goes on (fetched later) or is cancelled when the wait ends without a result. */
  onTimeout: OnWaitTimeout;
}

/** What a request asks for once its path and headers are read. */
export interface NegotiatedRequest {
  /** The request, with the database of the path when it names one. */
  request: ExecuteRequestDto;
  format: ResultFormat;
  /** Parquet: the codec of the file's pages (the Accept range's `compression` parameter). */
  parquetCompression?: ParquetCompression;
  encoding: { name: ContentEncoding; level: number } | undefined;
  /** The lane it waits in. */
  lane: Lane;
  /** Set when the request may be answered before its result (and the result is then kept). */
  wait: ResultWait | undefined;
  /** Its Idempotency-Key, checked; its result is then kept, for a repeat to be answered with. */
  idempotencyKey: string | undefined;
}

/** What a key may be: 1 to 255 visible ASCII characters. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/**
 * A digest of what makes two requests the same one: the statement, its parameters, where and as
 * whom it runs, and the answer's format and encoding.
 */
export function requestFingerprint(negotiated: NegotiatedRequest): string {
  const { request, format, encoding, lane } = negotiated;
  const parts = [
    request.statement,
    request.params ?? null,
    request.database ?? null,
    request.schema ?? null,
    request.format ?? 'array',
    request.fetch_size ?? null,
    request.max_rows ?? null,
    request.timeout ?? null,
    format,
    negotiated.parquetCompression ?? null,
    encoding ?? null,
    lane,
  ];
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}

/**
 * The wait a request asks for: `wait_timeout` in the body, else the Prefer header — `wait=N`
 * (seconds), or `respond-async` alone (at once). Unknown preferences are ignored, as RFC 7240
 * asks.
 */
export function resultWait(
  request: ExecuteRequestDto,
  prefer: string | undefined,
): ResultWait | undefined {
  const onTimeout = request.on_wait_timeout ?? 'continue';
  if (request.wait_timeout !== undefined) return { ms: request.wait_timeout, onTimeout };
  let async = false;
  let waitMs: number | undefined;
  for (const preference of (prefer ?? '').split(',')) {
    const [token, value] = preference
      .split(';')[0]
      .split('=')
      .map((part) => part.trim());
    if (token.toLowerCase() === 'respond-async') async = true;
    if (token.toLowerCase() === 'wait' && value !== undefined && /^\d{1,7}$/.test(value)) {
      waitMs = Math.min(Number(value) * 1000, 3_600_000);
    }
  }
  if (waitMs !== undefined) return { ms: waitMs, onTimeout };
  return async ? { ms: 0, onTimeout } : undefined;
}

/**
 * The statement's database (path or body, never two different ones), the response's format
 * (from Accept) and its encoding; throws the SluiceError of the first thing that does not fit, in
 * that order. Looks at nothing but its arguments.
 */
export function negotiateRequest(
  given: Readonly<ExecuteRequestDto>,
  options: ResponseOptions,
): NegotiatedRequest {
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
  const parquetCompression =
    format === 'parquet' ? negotiateParquetCompression(options.accept) : undefined;
  const wait = resultWait(request, options.prefer);
  if (request.on_wait_timeout !== undefined && !wait) {
    throw new SluiceError(
      'INVALID_REQUEST',
      'on_wait_timeout needs wait_timeout (or Prefer: wait=, respond-async)',
    );
  }
  const key = options.idempotencyKey;
  if (key !== undefined && !IDEMPOTENCY_KEY.test(key)) {
    throw new SluiceError(
      'INVALID_REQUEST',
      'Idempotency-Key must be 1 to 255 visible ASCII characters',
    );
  }
  return {
    request,
    format,
    ...(parquetCompression && { parquetCompression }),
    encoding: negotiateEncoding(options),
    lane: laneOf(format, request.lane),
    wait,
    idempotencyKey: key,
  };
}
