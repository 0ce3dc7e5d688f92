import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  IsBoolean,
  IsIn,
  IsInt,
  IsNotEmpty,
  IsObject,
  IsOptional,
  IsString,
  Max,
  MaxLength,
  Min,
} from 'class-validator';
import { LANES, Lane, ResultLayout } from '@app/contracts';

/** What a query whose wait ended without a result does: go on (fetched later) or stop. */
export const ON_WAIT_TIMEOUT = ['continue', 'cancel'] as const;
export type OnWaitTimeout = (typeof ON_WAIT_TIMEOUT)[number];

/** Body of POST /v1/execute (also built from the query string for GET and text/plain). */
export class ExecuteRequestDto {
  @ApiProperty({
    description: 'The SQL statement to execute; `{name}` parts are bound from `params`.',
    example: 'select 1 as one',
  })
  @IsString()
  @IsNotEmpty()
  statement!: string;

  @ApiPropertyOptional({ description: 'Target database (default: the one in DATABASE_URL).' })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(63)
  database?: string;

  @ApiPropertyOptional({ enum: ['array', 'collection'], default: 'array' })
  @IsOptional()
  @IsIn(['array', 'collection'])
  format?: ResultLayout;

  @ApiPropertyOptional({
    description: 'Values for the `{name}` placeholders, keyed by name.',
    type: 'object',
    additionalProperties: true,
  })
  @IsOptional()
  @IsObject()
  params?: Record<string, unknown>;

  @ApiPropertyOptional({
    description: 'Rows per chunk in streamed responses; 0: server default.',
    minimum: 0,
    default: 0,
  })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(1_000_000)
  fetch_size?: number;

  @ApiPropertyOptional({
    description: 'Maximum number of rows returned (default: unlimited).',
    minimum: 0,
  })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(Number.MAX_SAFE_INTEGER)
  max_rows?: number;

  @ApiPropertyOptional({
    description: 'Time limit for the statement in ms (default and maximum set by the server).',
    minimum: 1,
  })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(86_400_000)
  timeout?: number;

  @ApiPropertyOptional({ description: 'Schema put first on the search_path for the statement.' })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(63)
  schema?: string;

  @ApiPropertyOptional({
    enum: [...LANES],
    description:
      'Queue the query waits in (default: `export` for Parquet and Arrow answers, `interactive` otherwise).',
  })
  @IsOptional()
  @IsIn(LANES)
  lane?: Lane;

  @ApiPropertyOptional({
    description:
      'Wait at most this long (ms) for the first result bytes; if none are ready by then, answer ' +
      "202 with the query's URL (0: at once). The result is then kept for " +
      '`GET /v1/queries/{id}/result`. Absent: the response waits for the result. ' +
      '`Prefer: respond-async` and `Prefer: wait=<seconds>` (RFC 7240) ask the same.',
    minimum: 0,
    maximum: 3_600_000,
  })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(3_600_000)
  wait_timeout?: number;

  @ApiPropertyOptional({
    enum: ON_WAIT_TIMEOUT,
    default: 'continue',
    description:
      'When `wait_timeout` ends with no result: `continue` (202, fetch it later) or `cancel` ' +
      '(the query is cancelled; answered 409, -900).',
  })
  @IsOptional()
  @IsIn(ON_WAIT_TIMEOUT)
  on_wait_timeout?: OnWaitTimeout;

  @ApiPropertyOptional({
    description:
      'Keep the result, as `wait_timeout` does, for `GET /v1/queries/{id}/result` (with ' +
      '`Range: bytes=N-`): a client that loses the connection does not cancel the query and ' +
      'resumes the download where it was cut.',
    default: false,
  })
  @IsOptional()
  @IsBoolean()
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
