import {
  Lane,
  ContentEncoding,
  ExecuteRequestDto,
  MEDIA_TYPES,
  ResultFormat,
  SluiceError,
} from '@app/contracts';
import { SUPPORTED_FORMATS } from '@app/formats';
import { CompressionHeaders, negotiateEncoding } from './encoding.negotiator';
import { laneOf } from './lane';
import { negotiateFormat } from './media.negotiator';

/** How the client asked for the response. */
export interface ResponseOptions extends CompressionHeaders {
  accept?: string;
  /** Aborted when the client goes away. */
  signal?: AbortSignal;
  /** Database named in the path (`/v1/execute/{database}`). */
  database?: string;
}

/** What a request asks for once its path and headers are read. */
export interface NegotiatedRequest {
  /** The request, with the database of the path when it names one. */
  request: ExecuteRequestDto;
  format: ResultFormat;
  encoding: { name: ContentEncoding; level: number } | undefined;
  /** The lane it waits in. */
  lane: Lane;
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
  return {
    request,
    format,
    encoding: negotiateEncoding(options),
    lane: laneOf(format, request.lane),
  };
}
