import type { Status } from './client.types';

/**
 * - `status`: the server answered with an error status (HTTP or in-band final status);
 * - `connection`: the server could not be reached, or the connection broke mid-way;
 * - `protocol`: the server's answer was not what the wire contract says (e.g. no final status);
 * - `aborted`: the caller's AbortSignal ended the request.
 */
export type SluiceClientErrorKind = 'status' | 'connection' | 'protocol' | 'aborted';

/** The one error class of the client: every failure is one of these. */
export class SluiceClientError extends Error {
  readonly kind: SluiceClientErrorKind;
  /** The HTTP status, when an answer came (200 for an error after the first rows). */
  readonly httpStatus?: number;
  /** PostgreSQL's SQLSTATE, or the standard one the service uses for its own errors. */
  readonly sqlState?: string;
  /** The service's vendor code (negative), see docs/api.md's error catalogue. */
  readonly vendorCode?: number;
  readonly queryId?: string;
  /** Trying again later may succeed: 429 (queue full), 503 (no worker), connection failures. */
  readonly retryable: boolean;
  /** Seconds the server asked to wait before trying again (Retry-After). */
  readonly retryAfterSeconds?: number;

  constructor(
    message: string,
    fields: {
      kind: SluiceClientErrorKind;
      httpStatus?: number;
      sqlState?: string;
      vendorCode?: number;
      queryId?: string;
      retryAfterSeconds?: number;
      cause?: unknown;
    },
  ) {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause });
    this.name = 'SluiceClientError';
    this.kind = fields.kind;
    this.httpStatus = fields.httpStatus;
    this.sqlState = fields.sqlState;
    this.vendorCode = fields.vendorCode;
    this.queryId = fields.queryId;
    this.retryAfterSeconds = fields.retryAfterSeconds;
    this.retryable =
      fields.kind === 'connection' || fields.httpStatus === 429 || fields.httpStatus === 503;
  }

  /** From a status object the server sent (an error envelope or a final status line). */
  static fromStatus(
    status: Status,
    httpStatus: number,
    queryId?: string,
    retryAfterSeconds?: number,
  ): SluiceClientError {
    return new SluiceClientError(status.reason, {
      kind: 'status',
      httpStatus,
      sqlState: status.sql_state,
      vendorCode: status.vendor_code,
      queryId,
      retryAfterSeconds,
    });
  }
}
