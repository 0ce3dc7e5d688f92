/** A value as the server sends it in JSON: what PostgreSQL's `to_json()` gives for the column. */
export type JsonValue =
  null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A row in column order (the `array` layout). */
export type Row = JsonValue[];

/** One column of a result: its name and PostgreSQL type name as `format_type()` prints it. */
export interface Column {
  name: string;
  type: string;
}

/** The final status of a statement, as the server reports it. */
export interface Status {
  reason: string;
  sql_state: string;
  vendor_code: number;
  row_count?: number;
  truncated?: boolean;
}

/** What `query()` returns. */
export interface QueryResult<R extends Row = Row> {
  queryId: string;
  schema: Column[];
  rows: R[];
  status: Status;
}

/** Where a query is in its life. */
export type QueryState = 'queued' | 'running' | 'streaming' | 'succeeded' | 'failed' | 'cancelled';

/**
 * A query as `GET /v1/queries` shows it: the server's own type, field for field (a spec of the
 * server's checks the two against each other; this package copies it, as it depends on nothing).
 */
export interface QueryInfo {
  query_id: string;
  owner: string;
  state: QueryState;
  database: string | null;
  format: string;
  /** The queue the query waits (or waited) in. */
  lane: 'interactive' | 'export';
  /** The statement's text with placeholders (parameter values are never shown). */
  statement: string;
  created_at: string;
  started_at: string | null;
  /** When its first rows came back and began to stream. */
  streaming_at: string | null;
  finished_at: string | null;
  /** Milliseconds since creation, or from creation to the end. */
  elapsed_ms: number;
  /** Queries ahead of this one while it is queued. */
  queue_position: number | null;
  /** Rows and body bytes sent to a client so far. */
  rows: number;
  bytes: number;
  /** Rows and body bytes the worker has produced so far. */
  rows_produced: number;
  bytes_produced: number;
  status: Status | null;
  /** Where the kept result of a query sent with `waitTimeout` is fetched, or null. */
  result_url: string | null;
  /** Until when its kept result stays, once the query ended. */
  result_kept_until: string | null;
  /** Where its kept result's body is kept: `spool` or `redis`; null: nothing kept. */
  result_kept_in: 'spool' | 'redis' | null;
  /** Its OpenTelemetry trace's id, when the server traces the query. */
  trace_id: string | null;
}

/** Byte formats of `export()`, each with its media type. */
export const EXPORT_FORMATS = {
  parquet: 'application/parquet',
  arrow: 'application/vnd.apache.arrow.stream',
  csv: 'text/csv',
  ndjson: 'application/stream+json',
  json: 'application/json',
} as const;

export type ExportFormat = keyof typeof EXPORT_FORMATS;

/** Codecs of a Parquet export's pages: `Accept: application/parquet; compression=…`. */
export const PARQUET_COMPRESSIONS = ['zstd', 'snappy', 'gzip', 'none'] as const;
export type ParquetCompression = (typeof PARQUET_COMPRESSIONS)[number];

/** Values for the statement's `{name}` placeholders. */
export type Params = Record<string, JsonValue>;

/**
 * Per-statement options. The request fields map one to one onto `POST /v1/execute`'s.
 * Resuming a cut download (Range on a kept result) is to join this object (`resume`) so that no
 * signature changes.
 */
export interface QueryOptions {
  /** Aborting it ends the request; the server cancels the statement when the client goes away. */
  signal?: AbortSignal;
  database?: string;
  /** `search_path` for the statement. */
  schema?: string;
  /** Rows per streamed chunk (0: the server's default). */
  fetchSize?: number;
  maxRows?: number;
  /** Statement time limit in ms. */
  timeout?: number;
  lane?: 'interactive' | 'export';
  /**
   * Wait at most this many ms for the first bytes (`wait_timeout`): a statement that takes longer
   * is answered 202 and keeps its result on the server, which the client then fetches from the
   * query's result URL, so that no idle connection is held open past a proxy's patience.
   */
  waitTimeout?: number;
  /**
   * Sent as `Idempotency-Key`: a request repeated with the same key (a retry after a connection
   * failure, say) attaches to the query the first one started instead of running it again.
   */
  idempotencyKey?: string;
  /**
   * `export()` only: the server keeps the result (`resumable`), and a download whose connection
   * breaks is resumed where it was cut (`Range: bytes=N-` once the query has ended), so the bytes
   * are the same as an uncut download's. Such a download is not compressed (ranges count the
   * bytes as sent, and fetch decompresses what it receives).
   */
  resumable?: boolean;
  /** `export()` of Parquet only: the codec of the file's pages (the server's default: zstd). */
  parquetCompression?: ParquetCompression;
  /**
   * `export()` of a kept result (answered 202: `waitTimeout`) that the server spools to an object
   * store giving presigned URLs: how many of its segments are downloaded at once, straight from
   * the store (default 4). Without URLs (a directory, or no spool), or with 0, the result comes
   * through the service as one stream. Such a download is not compressed.
   */
  segmentDownloads?: number;
}

/** How the client authenticates. */
export type Credentials =
  /** Logs in with `POST /v1/login` and refreshes the token before it expires. */
  | { username: string; password: string; database?: string }
  /** A token from an earlier login; refreshed before it expires like one the client got. */
  | { token: string }
  /** HTTP Basic on every request (no token). */
  | { basic: { username: string; password: string } };

export interface SluiceClientOptions {
  /** The service's base URL, e.g. `http://127.0.0.1:8080`. */
  url: string;
  credentials: Credentials;
  /** Refresh a token this many seconds before its `exp` (default: 60, or half its lifetime). */
  refreshMarginSeconds?: number;
  /** Called with every new token (after a login or a refresh), e.g. to store it. */
  onToken?: (token: string) => void;
  /** A fetch of your own (default: the global one). */
  fetch?: typeof fetch;
  /**
   * How long a segment's download from the store may receive nothing (its answer's head
   * included) before it is dropped and tried again from where it stopped, in ms (default 30,000).
   */
  storeIdleTimeoutMs?: number;
}

/** One segment of a spooled kept result: where its bytes start in the body, and its URL. */
export interface ResultSegment {
  offset: number;
  size: number;
  /** Reads it straight from the store, with no other credential, until the manifest's `expires_at`. */
  url?: string;
}

/** GET /v1/queries/{id}/result/segments: a spooled kept result's segments, in order. */
export interface ResultManifest {
  query_id: string;
  /** The query ended well: the segments are the whole body. False while it runs. */
  complete: boolean;
  size: number;
  content_type: string;
  content_encoding?: string;
  expires_at?: string;
  segments: ResultSegment[];
}

/**
 * Bytes of a result read from the store: where they start in the result, and the parts they came
 * in; a piece of one segment (see ExportResult.segments).
 */
export interface ResultSegmentBytes {
  offset: number;
  parts: Uint8Array[];
}

/** What `export()` returns: the raw bytes as the server writes them. */
export interface ExportResult {
  queryId: string;
  contentType: string;
  body: ReadableStream<Uint8Array>;
  /**
   * With `source` `segments`: the same bytes as `body`, each segment's in pieces of about 1 MiB
   * with their offsets, handed over as they come from whichever download has them (the same
   * downloads at once, retries and checks; a segment read again is handed over again from its
   * start, at the same offsets). A writer that can put bytes at an offset (a file) takes them so:
   * it never holds bytes back for earlier ones still on their way, nor a whole segment in memory.
   * Read either this or `body`, not both.
   */
  segments?: AsyncIterable<ResultSegmentBytes>;
  /**
   * Where the bytes come from: `segments` straight from the store by presigned URLs, `service`
   * through the service.
   */
  source: 'segments' | 'service';
}
