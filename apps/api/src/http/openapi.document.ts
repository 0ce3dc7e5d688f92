import type { OpenAPIObject } from '@nestjs/swagger';
import { ERROR_CATALOGUE, MEDIA_TYPES, ResultFormat } from '@app/contracts';
import { EXECUTE_REQUEST_EXAMPLES, EXECUTE_TEXT_EXAMPLE } from '@app/http-contracts';
import { SUPPORTED_FORMATS } from '@app/formats';
import { ANY_HOST_ROUTES } from './host.check';

type Schema = Record<string, unknown>;
type Parameter = {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  schema?: Schema;
};
type Operation = {
  parameters?: Parameter[];
  requestBody?: { content?: Record<string, Schema> };
  security?: unknown[];
  responses: Record<string, { description?: string; content?: Record<string, unknown> }>;
};

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/** The wire shapes every client meets, whichever endpoint it calls. */
const SCHEMAS: Record<string, Schema> = {
  Status: {
    type: 'object',
    description:
      'The spec’s status object: `vendor_code` 0 on success, negative on error (README error table).',
    required: ['reason', 'sql_state', 'vendor_code'],
    properties: {
      reason: { type: 'string', example: 'OK' },
      sql_state: { type: 'string', pattern: '^[0-9A-Z]{5}$', example: '00000' },
      vendor_code: { type: 'integer', example: 0 },
      row_count: { type: 'integer', description: 'Rows returned (final status of a success).' },
      truncated: {
        type: 'boolean',
        description: 'Present and true when `max_rows` cut the result.',
      },
    },
  },
  ErrorEnvelope: {
    type: 'object',
    description:
      'Every error, whatever the status code: the query id when the query had one, and its status. Never a stack trace.',
    required: ['status'],
    properties: {
      query_id: { type: 'string', format: 'uuid' },
      status: ref('Status'),
    },
    example: {
      query_id: '0f8a2c1e-4b7d-4e4a-9c1a-2f3d4e5f6a7b',
      status: { reason: 'relation "nope" does not exist', sql_state: '42P01', vendor_code: -600 },
    },
  },
  ColumnSchema: {
    type: 'object',
    required: ['name', 'type'],
    properties: {
      name: { type: 'string' },
      type: { type: 'string', description: 'PostgreSQL’s type name, e.g. `integer`, `text[]`.' },
    },
  },
  ExecuteResult: {
    type: 'object',
    description:
      'application/json: `status` comes last, so a failure after rows were sent is still reported in the body.',
    required: ['query_id', 'data', 'status'],
    properties: {
      query_id: { type: 'string', format: 'uuid' },
      schema: { type: 'array', items: ref('ColumnSchema'), description: 'Array format only.' },
      data: {
        type: 'array',
        items: {},
        description: 'Rows: arrays (format `array`) or objects (format `collection`).',
      },
      status: ref('Status'),
    },
  },
  QueryInfo: {
    type: 'object',
    properties: {
      query_id: { type: 'string', format: 'uuid' },
      owner: { type: 'string' },
      state: {
        type: 'string',
        enum: ['queued', 'running', 'streaming', 'succeeded', 'failed', 'cancelled'],
      },
      database: { type: 'string', nullable: true },
      format: { type: 'string' },
      lane: {
        type: 'string',
        enum: ['interactive', 'export'],
        description: 'The queue the query waits (or waited) in.',
      },
      statement: {
        type: 'string',
        description:
          'Placeholders as written, values never: the whole statement (up to SLUICE_RECORD_STATEMENT_BYTES) for one query, its first 200 characters in a list.',
      },
      created_at: { type: 'string', format: 'date-time' },
      started_at: { type: 'string', format: 'date-time', nullable: true },
      streaming_at: {
        type: 'string',
        format: 'date-time',
        nullable: true,
        description: 'When its first rows came back and began to stream.',
      },
      finished_at: { type: 'string', format: 'date-time', nullable: true },
      elapsed_ms: { type: 'integer' },
      queue_position: {
        type: 'integer',
        nullable: true,
        description: 'Queries ahead of this one in its lane while it is queued.',
      },
      rows: { type: 'integer', description: 'Rows sent to a client so far.' },
      bytes: { type: 'integer', description: 'Body bytes sent to a client so far.' },
      rows_produced: {
        type: 'integer',
        description:
          'Rows the worker has produced so far, also when nobody reads them (updated about once a second while it runs).',
      },
      bytes_produced: {
        type: 'integer',
        description: 'Body bytes the worker has produced so far (as rows_produced).',
      },
      status: { allOf: [ref('Status')], nullable: true },
      result_url: {
        type: 'string',
        nullable: true,
        description: 'Where its kept result is fetched; null: nothing kept.',
      },
      result_kept_until: { type: 'string', format: 'date-time', nullable: true },
      trace_id: {
        type: 'string',
        nullable: true,
        description: 'Its OpenTelemetry trace id, when tracing is on and the request was sampled.',
      },
    },
  },
  ReadinessReport: {
    type: 'object',
    required: ['status', 'checks'],
    properties: {
      status: ref('Status'),
      checks: {
        type: 'object',
        additionalProperties: {
          type: 'object',
          properties: {
            ok: { type: 'boolean' },
            detail: { type: 'string' },
            ms: { type: 'integer' },
          },
        },
      },
    },
  },
};

/** What each error status means, with the catalogue codes behind it. */
function codesFor(http: number): string {
  return Object.entries(ERROR_CATALOGUE)
    .filter(([, entry]) => entry.http === http)
    .map(([code, entry]) => `${code} (${entry.vendorCode})`)
    .join(', ');
}

const ERROR_DESCRIPTIONS: Record<string, string> = {
  '400': 'Invalid request or SQL compile error',
  '401': 'Missing, bad or expired credentials (`WWW-Authenticate` says which)',
  '403': 'The user or its PostgreSQL role may not do this',
  '404': 'No such resource (or not yours)',
  '406': '`Accept` names no format Sluice produces',
  '409': 'The query was cancelled, or a constraint or transaction conflict',
  '413': 'Body or statement over a configured limit',
  '415': '`Content-Type` other than JSON or text/plain',
  '421': 'Sent to a name SLUICE_ALLOWED_HOSTS does not list',
  '429': 'Too many queries or failed logins (`Retry-After`)',
  '500': 'Internal error (logged with the query id; no detail is sent)',
  '503': 'Queue, worker or database unavailable',
  '504': 'The statement ran out of time, or waited too long in the queue',
};

const STREAM_DESCRIPTIONS: Record<ResultFormat, string> = {
  json: 'One JSON document, status last (see ExecuteResult).',
  ndjson:
    'Newline-delimited JSON (also `application/x-ndjson`): `{"query_id","schema"}`, one `{"data":[…]}` per chunk, last `{"status":{…}}`. Without the status line the stream is incomplete.',
  csv: 'CSV with a header row; a failure after the first row aborts the connection.',
  parquet:
    "One Parquet file, row groups written as produced; `X-Query-Id` header. Pages are compressed with ZSTD unless the media type's `compression` parameter names another codec (`application/parquet; compression=zstd|snappy|gzip|none`; any other value is 406). A failure mid-file aborts the connection (no footer).",
  arrow:
    'Arrow IPC stream, record batches written as produced; a failure mid-stream aborts the connection.',
};

function executeContent(): Record<string, unknown> {
  const content: Record<string, unknown> = {};
  for (const [format, mediaType] of Object.entries(MEDIA_TYPES) as [ResultFormat, string][]) {
    const built = SUPPORTED_FORMATS.includes(format) ? '' : ' Not encoded by this build (406).';
    const schema: Schema =
      format === 'json'
        ? ref('ExecuteResult')
        : format === 'parquet' || format === 'arrow'
          ? { type: 'string', format: 'binary' }
          : { type: 'string' };
    content[mediaType] = {
      schema: { ...schema, description: STREAM_DESCRIPTIONS[format] + built },
    };
  }
  return content;
}

/** Status codes an operation can answer besides its success, from what it is. */
function errorCodes(path: string, operation: Operation): string[] {
  const codes = new Set(['500', '503']);
  if (!ANY_HOST_ROUTES.has(path)) codes.add('421');
  const secured = (operation.security?.length ?? 0) > 0;
  if (secured) codes.add('401');
  if (operation.requestBody) ['400', '413', '415'].forEach((c) => codes.add(c));
  if (path.includes('{')) codes.add('404');
  if (path.startsWith('/v1/execute')) {
    ['400', '401', '403', '406', '409', '413', '415', '429', '504'].forEach((c) => codes.add(c));
  }
  if (path === '/v1/login') ['400', '401', '429'].forEach((c) => codes.add(c));
  if (path.startsWith('/v1/users')) codes.add('403');
  return [...codes];
}

/**
 * The query parameters of GET /v1/execute: the fields of the JSON request (ExecuteRequestDto's
 * schema, its examples and limits with them), `params` as its JSON text.
 */
function executeQueryParameters(request: Schema | undefined): Parameter[] {
  const properties = (request?.properties ?? {}) as Record<string, Schema>;
  const required = new Set((request?.required ?? []) as string[]);
  return Object.entries(properties).map(([name, property]) => {
    const { description = '', ...schema } = property;
    return {
      name,
      in: 'query',
      required: required.has(name),
      description: (name === 'params' ? 'JSON object. ' : '') + (description as string),
      schema: name === 'params' ? { type: 'string', example: '{"n": 41}' } : schema,
    };
  });
}

/**
 * Requests /docs sends as they are: the JSON body's named examples, and the statement of a
 * text/plain body (the schema's placeholders, `"string"` and `0`, are no statement).
 */
function describeExecuteBody(operation: Operation): void {
  const content = operation.requestBody?.content;
  if (!content) return;
  if (content['application/json']) content['application/json'].examples = EXECUTE_REQUEST_EXAMPLES;
  content['text/plain'] = {
    schema: { type: 'string', description: 'The statement.', example: EXECUTE_TEXT_EXAMPLE },
  };
}

/**
 * Completes the generated document with what decorators cannot say: the error envelope on every
 * error response, every status code each operation can answer, and the media types /v1/execute
 * streams. Operations keep whatever their own decorators described.
 */
export function describeWire(document: OpenAPIObject): OpenAPIObject {
  document.components ??= {};
  document.components.schemas = { ...SCHEMAS, ...document.components.schemas };
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, value] of Object.entries(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const operation = value as Operation;
      operation.responses ??= {};
      for (const code of errorCodes(path, operation)) {
        operation.responses[code] ??= { description: ERROR_DESCRIPTIONS[code] };
      }
      for (const [code, response] of Object.entries(operation.responses)) {
        if (Number(code) < 400) continue;
        const description = response.description ?? ERROR_DESCRIPTIONS[code] ?? 'Error';
        const codes = codesFor(Number(code));
        response.description = codes
          ? `${description}. Catalogue codes with this status: ${codes}.`
          : description;
        const schema = path === '/health/ready' ? ref('ReadinessReport') : ref('ErrorEnvelope');
        response.content = { 'application/json': { schema } };
      }
      if (path.startsWith('/v1/execute') && method === 'post') describeExecuteBody(operation);
      if (path.startsWith('/v1/execute') && method === 'get') {
        const request = document.components.schemas.ExecuteRequestDto as Schema | undefined;
        operation.parameters = [
          ...(operation.parameters ?? []).filter((p) => p.in !== 'query'),
          ...executeQueryParameters(request),
        ];
      }
      if (path.startsWith('/v1/execute')) {
        // The result is always a 200, never Nest's default 201 for POST.
        delete operation.responses['201'];
        const ok = (operation.responses['200'] ??= { description: 'The result' });
        ok.content = executeContent();
        const accept = operation.parameters?.find(
          (p) => p.in === 'header' && p.name.toLowerCase() === 'accept',
        );
        if (accept) accept.schema = { type: 'string', enum: Object.values(MEDIA_TYPES) };
      }
      if (path === '/v1/queries' && operation.responses['200'] && method === 'get') {
        operation.responses['200'].content = {
          'application/json': { schema: { type: 'array', items: ref('QueryInfo') } },
        };
      }
      if (path === '/v1/queries/{queryId}' && operation.responses['200']) {
        operation.responses['200'].content = { 'application/json': { schema: ref('QueryInfo') } };
      }
      if (path === '/health/live' && operation.responses['200']) {
        operation.responses['200'].content = {
          'application/json': {
            schema: { type: 'object', properties: { status: ref('Status') } },
          },
        };
      }
      if (path === '/health/ready' && operation.responses['200']) {
        operation.responses['200'].content = {
          'application/json': { schema: ref('ReadinessReport') },
        };
      }
    }
  }
  return document;
}
