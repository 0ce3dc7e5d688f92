import { LANES, Lane, ResultLayout } from '@app/contracts';
import { ChoiceField, FlagField, IntegerField, ObjectField, TextField } from './request.fields';

/** What a query whose wait ended without a result does: go on (fetched later) or stop. */
export const ON_WAIT_TIMEOUT = ['continue', 'cancel'] as const;
export type OnWaitTimeout = (typeof ON_WAIT_TIMEOUT)[number];

/** Body of POST /v1/execute (also built from the query string for GET and text/plain). */
export class ExecuteRequestDto {
  @TextField({
    description: 'The SQL statement to execute; `{name}` parts are bound from `params`.',
    example: 'select 1 as one',
    notEmpty: true,
  })
  statement!: string;

  @TextField({
    presence: 'absent-or-null',
    description: 'Target database (default: the one in DATABASE_URL).',
    notEmpty: true,
    maxLength: 63,
  })
  database?: string;

  @ChoiceField(['array', 'collection'], { presence: 'absent-or-null', default: 'array' })
  format?: ResultLayout;

  @ObjectField({
    presence: 'absent-or-null',
    description: 'Values for the `{name}` placeholders, keyed by name.',
  })
  params?: Record<string, unknown>;

  @IntegerField({
    presence: 'absent-or-null',
    description: 'Rows per chunk in streamed responses; 0: server default.',
    default: 0,
    min: 0,
    max: 1_000_000,
  })
  fetch_size?: number;

  @IntegerField({
    presence: 'absent-or-null',
    description: 'Maximum number of rows returned (default: unlimited).',
    min: 0,
    max: Number.MAX_SAFE_INTEGER,
  })
  max_rows?: number;

  @IntegerField({
    presence: 'absent-or-null',
    description: 'Time limit for the statement in ms (default and maximum set by the server).',
    min: 1,
    max: 86_400_000,
  })
  timeout?: number;

  @TextField({
    presence: 'absent-or-null',
    description: 'Schema put first on the search_path for the statement.',
    notEmpty: true,
    maxLength: 63,
  })
  schema?: string;

  @ChoiceField(LANES, {
    presence: 'absent-or-null',
    description:
      'Queue the query waits in (default: `export` for Parquet and Arrow answers, `interactive` otherwise).',
  })
  lane?: Lane;

  @IntegerField({
    presence: 'absent-or-null',
    description:
      'Wait at most this long (ms) for the first result bytes; if none are ready by then, answer ' +
      "202 with the query's URL (0: at once). The result is then kept for " +
      '`GET /v1/queries/{id}/result`. Absent: the response waits for the result. ' +
      '`Prefer: respond-async` and `Prefer: wait=<seconds>` (RFC 7240) ask the same.',
    min: 0,
    max: 3_600_000,
  })
  wait_timeout?: number;

  @ChoiceField(ON_WAIT_TIMEOUT, {
    presence: 'absent-or-null',
    default: 'continue',
    description:
      'When `wait_timeout` ends with no result: `continue` (202, fetch it later) or `cancel` ' +
      '(the query is cancelled; answered 409, -900).',
  })
  on_wait_timeout?: OnWaitTimeout;

  @FlagField({
    presence: 'absent-or-null',
    description:
      'Keep the result, as `wait_timeout` does, for `GET /v1/queries/{id}/result` (with ' +
      '`Range: bytes=N-`): a client that loses the connection does not cancel the query and ' +
      'resumes the download where it was cut.',
    default: false,
  })
  resumable?: boolean;
}

/**
 * The requests /docs offers to send as they are (OpenAPI `examples` of POST /v1/execute): each
 * runs on any database Sluice serves, and docs.e2e-spec sends each and expects a success.
 */
export const EXECUTE_REQUEST_EXAMPLES = {
  one: { summary: 'One statement', value: { statement: 'select 1 as one' } },
  params: {
    summary: 'Values bound to `{name}` placeholders',
    value: {
      statement: 'select {n}::int + 1 as next, {city} as city',
      params: { n: 41, city: 'Oslo' },
    },
  },
  collection: {
    summary: 'Rows as objects, at most 5 of them',
    value: {
      statement: 'select g, g * g as square from generate_series(1, 10) g',
      format: 'collection',
      max_rows: 5,
    },
  },
  limits: {
    summary: 'A time limit, and a 202 with the query URL if the result takes over a second',
    value: { statement: 'select now() as at', timeout: 5000, wait_timeout: 1000 },
  },
} as const satisfies Record<string, { summary: string; value: ExecuteRequestDto }>;

/** The text/plain form's example: the body is the statement. */
export const EXECUTE_TEXT_EXAMPLE = 'select 1 as one';
