import { Status } from './status';

/**
 * Every error the service can answer with: HTTP status, SQLSTATE and vendor code.
 * Vendor codes follow the Ocient HTTP API where it has one; the README documents this table.
 */
export const ERROR_CATALOGUE = {
  INVALID_REQUEST: { http: 400, sqlState: '08P01', vendorCode: -100, reason: 'invalid request' },
  MISSING_PARAMETER: {
    http: 400,
    sqlState: '42P02',
    vendorCode: -101,
    reason: 'missing parameter',
  },
  NOT_FOUND: { http: 404, sqlState: '42704', vendorCode: -104, reason: 'not found' },
  NOT_ACCEPTABLE: { http: 406, sqlState: '0A000', vendorCode: -105, reason: 'unsupported Accept' },
  PAYLOAD_TOO_LARGE: {
    http: 413,
    sqlState: '54000',
    vendorCode: -106,
    reason: 'request too large',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    http: 415,
    sqlState: '0A000',
    vendorCode: -107,
    reason: 'unsupported Content-Type',
  },
  AUTH_REQUIRED: {
    http: 401,
    sqlState: '28000',
    vendorCode: -300,
    reason: 'authentication required',
  },
  TOKEN_INVALID: { http: 401, sqlState: '28000', vendorCode: -301, reason: 'invalid token' },
  TOKEN_EXPIRED: { http: 401, sqlState: '28000', vendorCode: -302, reason: 'token expired' },
  TOKEN_REVOKED: { http: 401, sqlState: '28000', vendorCode: -303, reason: 'token revoked' },
  BAD_CREDENTIALS: { http: 401, sqlState: '28P01', vendorCode: -304, reason: 'bad credentials' },
  TOO_MANY_ATTEMPTS: {
    http: 429,
    sqlState: '08004',
    vendorCode: -305,
    reason: 'too many failed logins',
  },
  LOGIN_REFUSED: {
    http: 401,
    sqlState: '28000',
    vendorCode: -306,
    reason: 'the database refused the login',
  },
  LOGIN_UNVERIFIED: {
    http: 401,
    sqlState: '28000',
    vendorCode: -307,
    reason: 'the database did not check the password',
  },
  UNKNOWN_ROLE: { http: 400, sqlState: '42704', vendorCode: -310, reason: 'unknown role' },
  USER_EXISTS: { http: 409, sqlState: '42710', vendorCode: -311, reason: 'user already exists' },
  ROLE_CHANGE: {
    http: 403,
    sqlState: '42501',
    vendorCode: -702,
    reason: 'a statement may not change its role',
  },
  CROSS_SITE: {
    http: 403,
    sqlState: '42501',
    vendorCode: -703,
    reason: 'cross-site request refused',
  },
  HOST_NOT_ALLOWED: {
    http: 421,
    sqlState: '42501',
    vendorCode: -704,
    reason: 'host not allowed',
  },
  LIMIT_EXCEEDED: {
    http: 413,
    sqlState: '54000',
    vendorCode: -111,
    reason: 'request over a configured limit',
  },
  FORBIDDEN: { http: 403, sqlState: '42501', vendorCode: -700, reason: 'permission denied' },
  QUEUE_FULL: { http: 429, sqlState: '53000', vendorCode: -108, reason: 'too many queries' },
  CANCELLED: { http: 409, sqlState: '57014', vendorCode: -900, reason: 'query cancelled' },
  TIME_LIMIT: { http: 504, sqlState: '57014', vendorCode: -1122, reason: 'time limit exceeded' },
  UNAVAILABLE: { http: 503, sqlState: '57P03', vendorCode: -109, reason: 'service unavailable' },
  WORKER_LOST: { http: 503, sqlState: '58000', vendorCode: -110, reason: 'worker lost' },
  INTERNAL: { http: 500, sqlState: 'XX000', vendorCode: -103, reason: 'internal error' },
  RESULT_TOO_LARGE: {
    http: 413,
    sqlState: '54000',
    vendorCode: -112,
    reason: 'result over the retention cap',
  },
  RESULT_GONE: { http: 410, sqlState: '0A000', vendorCode: -113, reason: 'result no longer kept' },
  IDEMPOTENCY_CONFLICT: {
    http: 422,
    sqlState: '22023',
    vendorCode: -114,
    reason: 'idempotency key used for another request',
  },
  TOO_MANY_KEYS: {
    http: 429,
    sqlState: '53400',
    vendorCode: -115,
    reason: 'too many idempotency keys',
  },
  // Database errors, chosen by SQLSTATE in pgErrorKind().
  SYNTAX_ERROR: { http: 400, sqlState: '42601', vendorCode: -500, reason: 'syntax error' },
  MULTIPLE_STATEMENTS: {
    http: 400,
    sqlState: '42601',
    vendorCode: -501,
    reason: 'one statement per request',
  },
  UNDEFINED_TABLE: { http: 400, sqlState: '42P01', vendorCode: -600, reason: 'undefined table' },
  UNDEFINED_COLUMN: { http: 400, sqlState: '42703', vendorCode: -400, reason: 'undefined column' },
  UNKNOWN_DATABASE: { http: 400, sqlState: '3D000', vendorCode: -205, reason: 'unknown database' },
  PRIVILEGE: { http: 403, sqlState: '42501', vendorCode: -700, reason: 'insufficient privilege' },
  READ_ONLY: { http: 403, sqlState: '25006', vendorCode: -701, reason: 'read-only transaction' },
  STATEMENT_ERROR: { http: 400, sqlState: '42000', vendorCode: -510, reason: 'statement error' },
  DATA_ERROR: { http: 400, sqlState: '22000', vendorCode: -520, reason: 'data exception' },
  CONSTRAINT: { http: 409, sqlState: '23000', vendorCode: -530, reason: 'constraint violation' },
  CONFLICT: { http: 409, sqlState: '40001', vendorCode: -540, reason: 'transaction conflict' },
  DB_UNAVAILABLE: {
    http: 503,
    sqlState: '08006',
    vendorCode: -206,
    reason: 'database unavailable',
  },
  DB_ERROR: { http: 400, sqlState: 'XX000', vendorCode: -599, reason: 'database error' },
} as const satisfies Record<string, CatalogueEntry>;

export interface CatalogueEntry {
  http: number;
  sqlState: string;
  vendorCode: number;
  reason: string;
}

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** An error the service answers with on purpose; carries its catalogue code. */
export class SluiceError extends Error {
  readonly sqlState: string;
  constructor(
    readonly code: ErrorCode,
    message?: string,
    sqlState?: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message ?? ERROR_CATALOGUE[code].reason);
    this.name = 'SluiceError';
    this.sqlState = sqlState ?? ERROR_CATALOGUE[code].sqlState;
  }

  get http(): number {
    return ERROR_CATALOGUE[this.code].http;
  }

  toStatus(): Status {
    return {
      reason: this.message,
      sql_state: this.sqlState,
      vendor_code: ERROR_CATALOGUE[this.code].vendorCode,
    };
  }
}

/** Picks the catalogue entry for a PostgreSQL SQLSTATE. */
export function pgErrorKind(sqlState: string | undefined): ErrorCode {
  if (!sqlState || sqlState.length !== 5) return 'INTERNAL';
  switch (sqlState) {
    case '42601':
      return 'SYNTAX_ERROR';
    case '42P01':
      return 'UNDEFINED_TABLE';
    case '42703':
      return 'UNDEFINED_COLUMN';
    case '3D000':
      return 'UNKNOWN_DATABASE';
    case '42501':
      return 'PRIVILEGE';
    case '25006':
      return 'READ_ONLY';
    case '57014':
      return 'CANCELLED';
    case '28000':
    case '28P01':
      return 'LOGIN_REFUSED';
    case '57P01':
    case '57P02':
    case '57P03':
      return 'DB_UNAVAILABLE';
  }
  // A protocol violation the server reports is caused by the request (e.g. `$1` with no value).
  if (sqlState === '08P01') return 'DB_ERROR';
  switch (sqlState.slice(0, 2)) {
    case '08':
    case '53':
      return 'DB_UNAVAILABLE';
    case '22':
      return 'DATA_ERROR';
    case '23':
      return 'CONSTRAINT';
    case '40':
      return 'CONFLICT';
    case '42':
    case '0A':
    case '54':
      return 'STATEMENT_ERROR';
    case 'XX':
      return 'INTERNAL';
    default:
      return 'DB_ERROR';
  }
}

/**
 * What PostgreSQL answers (42601) when the extended protocol's Parse holds two statements: every
 * statement runs through it, so a user who prepared nothing would read about prepared statements.
 * Told from the error, not from the SQL: only the server knows where a statement ends.
 */
const MULTIPLE_COMMANDS = 'cannot insert multiple commands into a prepared statement';

/** Status for a PostgreSQL error: its own message and SQLSTATE, our vendor code. */
export function pgErrorStatus(message: string, sqlState: string | undefined): Status {
  if (sqlState === '42601' && message === MULTIPLE_COMMANDS) {
    return statusOf(
      'MULTIPLE_STATEMENTS',
      `one statement per request: this one holds more than one (PostgreSQL: ${MULTIPLE_COMMANDS})`,
    );
  }
  const kind = pgErrorKind(sqlState);
  return {
    reason: message,
    sql_state: sqlState && sqlState.length === 5 ? sqlState : ERROR_CATALOGUE[kind].sqlState,
    vendor_code: ERROR_CATALOGUE[kind].vendorCode,
  };
}

/** HTTP status that goes with a status object written by a worker. */
export function httpStatusOf(status: Status): number {
  for (const entry of Object.values(ERROR_CATALOGUE) as CatalogueEntry[]) {
    if (entry.vendorCode === status.vendor_code) return entry.http;
  }
  return status.vendor_code === 0 ? 200 : 500;
}

/** The status object of a catalogue entry, with its own reason or the given one. */
export function statusOf(code: ErrorCode, reason?: string): Status {
  const entry: CatalogueEntry = ERROR_CATALOGUE[code];
  return {
    reason: reason ?? entry.reason,
    sql_state: entry.sqlState,
    vendor_code: entry.vendorCode,
  };
}
