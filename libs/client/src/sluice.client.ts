import {
  EXPORT_FORMATS,
  type Column,
  type ExportFormat,
  type ExportResult,
  type Params,
  type QueryInfo,
  type QueryOptions,
  type QueryResult,
  type Status,
  type ResultManifest,
  type Row,
  type SluiceClientOptions,
} from './client.types';
import { tokenTimes } from './jwt.claims';
import { ndjsonLines } from './ndjson.reader';
import { segmentBytes, segmentsAsTheyCome } from './segments.reader';
import { SluiceClientError } from './sluice-client.error';

/** A stream's first line, its data lines and its last line (docs/api.md, stream+json). */
interface StreamLine {
  query_id?: string;
  schema?: Column[];
  data?: Row[];
  status?: Status;
}

/** A 202's body: the query runs on; its result is at `links.result`. */
interface AcceptedAnswer {
  query_id: string;
  links?: { result?: string };
}

interface LoginAnswer {
  access_token: string;
}

/** The async iterator `stream()` returns; `queryId` and `schema` are known after the first row. */
export interface RowStream<R extends Row = Row> extends AsyncIterable<R> {
  readonly queryId: string | undefined;
  readonly schema: Column[] | undefined;
  /** The final status, once the iteration has ended. */
  readonly status: Status | undefined;
  /** Bytes of the response body received so far (for progress). */
  readonly bytes: number;
}

const DEFAULT_MARGIN_MS = 60_000;

/** How often `export()` resumes one cut download before it gives up. */
const RESUME_ATTEMPTS = 3;
/**
 * How long a cut download waits for the service to answer again (its query's state) before it
 * fails with the service's last failure (ms): a service that is gone for good is not waited for
 * for ever.
 */
export const SERVICE_GONE_MS = 60_000;
/** Segments of a kept result downloaded at once from the store, unless told otherwise. */
export const SEGMENT_DOWNLOADS = 4;
/** How long a segment's download may receive nothing from the store, unless told otherwise (ms). */
export const STORE_IDLE_TIMEOUT_MS = 30_000;

/**
 * A client for Sluice's HTTP API over the platform's fetch and web streams only, so that it runs
 * in Node (20 and later) and in browsers alike.
 */
export class SluiceClient {
  private readonly url: string;
  private readonly fetchFn: typeof fetch;
  private token: string | undefined;
  private expiresAt: number | undefined;
  private issuedAt = 0;
  // One refresh at a time: requests that find the token due all wait for the same one.
  private renewal: Promise<void> | undefined;

  constructor(private readonly options: SluiceClientOptions) {
    this.url = options.url.replace(/\/+$/, '');
    this.fetchFn = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    const idle = options.storeIdleTimeoutMs;
    if (idle !== undefined && !(Number.isFinite(idle) && idle > 0)) {
      throw new SluiceClientError('storeIdleTimeoutMs must be a number of milliseconds above 0', {
        kind: 'protocol',
      });
    }
    if ('token' in options.credentials) this.adopt(options.credentials.token);
  }

  /** The token in use (after a login or refresh), e.g. to store it; undefined with Basic. */
  get accessToken(): string | undefined {
    return this.token;
  }

  /** Logs in with the username and password given; other requests do it when needed. */
  async login(): Promise<string> {
    const credentials = this.options.credentials;
    if (!('username' in credentials)) {
      throw new SluiceClientError('this client has no username and password to log in with', {
        kind: 'protocol',
      });
    }
    const res = await this.send('/v1/login', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        username: credentials.username,
        password: credentials.password,
        ...(credentials.database ? { database: credentials.database } : {}),
      }),
    });
    const answer = (await this.json(res)) as LoginAnswer;
    this.adopt(answer.access_token);
    return answer.access_token;
  }

  /** Runs a statement and returns all its rows. */
  async query<R extends Row = Row>(
    sql: string,
    params?: Params,
    options: QueryOptions = {},
  ): Promise<QueryResult<R>> {
    const stream = this.stream<R>(sql, params, options);
    const rows: R[] = [];
    for await (const row of stream) rows.push(row);
    return { queryId: stream.queryId!, schema: stream.schema!, rows, status: stream.status! };
  }

  /**
   * Runs a statement and yields its rows as they arrive (application/stream+json). Ends after
   * the final status line; throws a SluiceClientError on an error status, or when the stream
   * ends without one (the result is incomplete).
   */
  stream<R extends Row = Row>(
    sql: string,
    params?: Params,
    options: QueryOptions = {},
  ): RowStream<R> {
    const state: { queryId?: string; schema?: Column[]; status?: Status; bytes: number } = {
      bytes: 0,
    };
    const rows = async function* (client: SluiceClient): AsyncGenerator<R> {
      const { res } = await client.execute(sql, params, options, EXPORT_FORMATS.ndjson);
      const httpStatus = res.status;
      const counted = res.body!.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            state.bytes += chunk.byteLength;
            controller.enqueue(chunk);
          },
        }),
      );
      for await (const line of client.guard(ndjsonLines(counted), options.signal, state)) {
        if (state.status) {
          throw new SluiceClientError('the stream went on after its final status line', {
            kind: 'protocol',
            httpStatus,
            queryId: state.queryId,
          });
        }
        let record: StreamLine;
        try {
          record = JSON.parse(line) as StreamLine;
        } catch (cause) {
          throw new SluiceClientError('the stream sent a line that is not JSON', {
            kind: 'protocol',
            httpStatus,
            queryId: state.queryId,
            cause,
          });
        }
        if (record.query_id !== undefined) state.queryId = record.query_id;
        if (record.schema !== undefined) state.schema = record.schema;
        if (record.data) for (const row of record.data) yield row as R;
        // A failure is thrown once the body has ended, as a success returns: a line after the
        // status is noticed either way.
        if (record.status) state.status = record.status;
      }
      if (!state.status) {
        throw new SluiceClientError('the result ended without its final status line: incomplete', {
          kind: 'protocol',
          httpStatus,
          queryId: state.queryId,
        });
      }
      if (state.status.vendor_code < 0) {
        throw SluiceClientError.fromStatus(state.status, httpStatus, state.queryId);
      }
    };
    const iterable = rows(this);
    return {
      [Symbol.asyncIterator]: () => iterable,
      get queryId() {
        return state.queryId;
      },
      get schema() {
        return state.schema;
      },
      get status() {
        return state.status;
      },
      get bytes() {
        return state.bytes;
      },
    };
  }

  /**
   * Runs a statement and returns its result as the raw bytes of `format` (a Parquet file, an
   * Arrow IPC stream, CSV …). A failure after the first byte breaks the body stream with a
   * SluiceClientError: the server cuts the connection so that a partial file never looks whole.
   */
  async export(
    sql: string,
    params: Params | undefined,
    format: ExportFormat,
    options: QueryOptions = {},
  ): Promise<ExportResult> {
    // The codec is a parameter of the Parquet media type; the type alone fetches a kept result.
    const accept =
      format === 'parquet' && options.parquetCompression !== undefined
        ? `${EXPORT_FORMATS.parquet}; compression=${options.parquetCompression}`
        : EXPORT_FORMATS[format];
    const parallel = segmentDownloadsOf(options);
    // Segments are the body as the server encoded it: read from the store, it must be plain.
    const bySegments = parallel > 0 && options.waitTimeout !== undefined;
    const submitted = await this.submit({ sql, params, options, accept, plain: bySegments });
    const queryId = submitted.queryId ?? '';
    if (submitted.location !== undefined && bySegments) {
      const fromStore = await this.fromStore(queryId, parallel, options.signal);
      if (fromStore) return fromStore;
    }
    const res =
      submitted.location !== undefined
        ? await this.follow(submitted.location, accept, options.signal)
        : submitted.res!;
    const bytes = options.resumable
      ? this.resumed(res, queryId, EXPORT_FORMATS[format], options.signal)
      : byteChunks(res.body!);
    const chunks = this.guard(bytes, options.signal, { queryId });
    return {
      queryId,
      contentType: res.headers.get('content-type') ?? EXPORT_FORMATS[format],
      body: bodyOf(chunks),
      source: 'service',
    };
  }

  /**
   * The kept result of a query sent earlier (with `waitTimeout`, or `resumable`), read as
   * `export()` reads one: straight from the store by its segments when the server gives their
   * URLs (`segmentDownloads` at once, default 4; 0: never), else through the service as it comes.
   */
  async result(
    queryId: string,
    options: { accept?: string; segmentDownloads?: number; signal?: AbortSignal } = {},
  ): Promise<ExportResult> {
    const parallel = segmentDownloadsOf(options);
    const fromStore =
      parallel > 0 ? await this.fromStore(queryId, parallel, options.signal) : undefined;
    if (fromStore) return fromStore;
    const headers: Record<string, string> = { 'accept-encoding': 'identity' };
    if (options.accept !== undefined) headers.accept = options.accept;
    const res = await this.authorized(`/v1/queries/${encodeURIComponent(queryId)}/result`, {
      method: 'GET',
      headers,
      signal: options.signal,
    });
    const chunks = this.guard(byteChunks(res.body!), options.signal, { queryId });
    return {
      queryId,
      contentType: res.headers.get('content-type') ?? 'application/octet-stream',
      body: bodyOf(chunks),
      source: 'service',
    };
  }

  /** A kept result read from the store by its segments, or undefined when it cannot be. */
  private async fromStore(
    queryId: string,
    parallel: number,
    signal: AbortSignal | undefined,
  ): Promise<ExportResult | undefined> {
    const manifest = await this.segmentsToRead(queryId, signal);
    if (!manifest) return undefined;
    const source = {
      queryId,
      refresh: () => this.manifest(queryId, signal),
      fetch: this.fetchFn,
      parallel,
      attempts: RESUME_ATTEMPTS,
      idleMs: this.options.storeIdleTimeoutMs ?? STORE_IDLE_TIMEOUT_MS,
      signal,
    };
    // Each starts its downloads only when it is read: the one not read costs nothing.
    return {
      queryId,
      contentType: manifest.content_type,
      body: bodyOf(this.guard(segmentBytes(manifest, source), signal, { queryId })),
      segments: {
        [Symbol.asyncIterator]: () =>
          this.guard(segmentsAsTheyCome(manifest, source), signal, { queryId }),
      },
      source: 'segments',
    };
  }

  /**
   * The manifest of a spooled kept result (GET /v1/queries/{id}/result/segments): its segments so
   * far, with presigned URLs when the server's store gives them.
   */
  async manifest(queryId: string, signal?: AbortSignal): Promise<ResultManifest> {
    const res = await this.authorized(
      `/v1/queries/${encodeURIComponent(queryId)}/result/segments`,
      { method: 'GET', signal },
    );
    return (await this.json(res)) as ResultManifest;
  }

  /** Cancels a query (DELETE /v1/queries/{id}); answers its state after the request. */
  async cancel(queryId: string): Promise<QueryInfo> {
    const res = await this.authorized(`/v1/queries/${encodeURIComponent(queryId)}`, {
      method: 'DELETE',
    });
    return (await this.json(res)) as QueryInfo;
  }

  /** One query's state, queue position, timings, rows and bytes sent (GET /v1/queries/{id}). */
  async queryInfo(queryId: string): Promise<QueryInfo> {
    const res = await this.authorized(`/v1/queries/${encodeURIComponent(queryId)}`, {
      method: 'GET',
    });
    return (await this.json(res)) as QueryInfo;
  }

  /** Your recent queries (an admin's: everyone's), newest first. */
  async queries(): Promise<QueryInfo[]> {
    const res = await this.authorized('/v1/queries', { method: 'GET' });
    return (await this.json(res)) as QueryInfo[];
  }

  /** Revokes the token everywhere (POST /v1/logout). */
  async logout(): Promise<void> {
    if (!this.token) return;
    const res = await this.authorized('/v1/logout', { method: 'POST' });
    await this.json(res);
    this.token = undefined;
    this.expiresAt = undefined;
  }

  /** Sends the statement; a 202's result is then read as it comes from its result URL. */
  private async execute(
    sql: string,
    params: Params | undefined,
    options: QueryOptions,
    accept: string,
  ): Promise<{ res: Response; queryId?: string }> {
    const submitted = await this.submit({ sql, params, options, accept });
    if (submitted.location === undefined)
      return { res: submitted.res!, queryId: submitted.queryId };
    const res = await this.follow(submitted.location, accept, options.signal);
    return { res, queryId: submitted.queryId };
  }

  /**
   * POST /v1/execute: the response, or, when answered 202 (the query runs on and keeps its
   * result), where its result is fetched.
   */
  private async submit(request: {
    sql: string;
    params: Params | undefined;
    options: QueryOptions;
    accept: string;
    /** The body must come as the server encoded it (no Content-Encoding). */
    plain?: boolean;
  }): Promise<{ res?: Response; queryId?: string; location?: string }> {
    const { sql, params, options, accept, plain = false } = request;
    const body: Record<string, unknown> = { statement: sql };
    if (params) body.params = params;
    if (options.database !== undefined) body.database = options.database;
    if (options.schema !== undefined) body.schema = options.schema;
    if (options.fetchSize !== undefined) body.fetch_size = options.fetchSize;
    if (options.maxRows !== undefined) body.max_rows = options.maxRows;
    if (options.timeout !== undefined) body.timeout = options.timeout;
    if (options.lane !== undefined) body.lane = options.lane;
    if (options.waitTimeout !== undefined) body.wait_timeout = options.waitTimeout;
    if (options.resumable) body.resumable = true;
    const headers: Record<string, string> = { 'content-type': 'application/json', accept };
    if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
    // A range counts the bytes as sent, and segments are the body as encoded: fetch would hand
    // over a compressed body decompressed, and a segment read from a store is not.
    if (options.resumable || plain) headers['accept-encoding'] = 'identity';
    const res = await this.authorized('/v1/execute', {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
      signal: options.signal,
    });
    if (res.status !== 202) return { res, queryId: res.headers.get('x-query-id') ?? undefined };
    // Accepted: the query runs on and keeps its result, fetched (as it comes) from its URL.
    const accepted = (await this.json(res)) as AcceptedAnswer;
    const location =
      accepted.links?.result ?? `/v1/queries/${encodeURIComponent(accepted.query_id)}/result`;
    return { queryId: accepted.query_id, location: location.replace(/^https?:\/\/[^/]+/, '') };
  }

  /** GET a kept result's URL: its bytes as they come. */
  private follow(location: string, accept: string, signal: AbortSignal | undefined) {
    return this.authorized(location, { method: 'GET', headers: { accept }, signal });
  }

  /**
   * The manifest to read a kept result by, when its segments can be read from the store: it
   * lists at least one, each with a URL, and a plain body. Undefined when the result is to be
   * read through the service: not spooled here (404), a directory's segments (no URLs), an
   * encoded body, or one that ended with no segment. While none is written yet, it asks again.
   */
  private async segmentsToRead(
    queryId: string,
    signal: AbortSignal | undefined,
  ): Promise<ResultManifest | undefined> {
    for (let delay = 50; ; delay = Math.min(delay * 2, 1000)) {
      let manifest: ResultManifest;
      try {
        manifest = await this.manifest(queryId, signal);
      } catch (err) {
        if (err instanceof SluiceClientError && err.httpStatus === 404) return undefined;
        throw err;
      }
      const encoded =
        manifest.content_encoding !== undefined && manifest.content_encoding !== 'identity';
      if (encoded) return undefined;
      if (manifest.segments.length > 0) {
        return manifest.segments.every((s) => s.url) ? manifest : undefined;
      }
      if (manifest.complete) return undefined;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }

  /** A request with credentials; a token due for renewal is refreshed first. */
  private async authorized(path: string, init: RequestInit): Promise<Response> {
    const headers = new Headers(init.headers);
    const credentials = this.options.credentials;
    if ('basic' in credentials) {
      const { username, password } = credentials.basic;
      headers.set('authorization', `Basic ${base64(`${username}:${password}`)}`);
    } else {
      await this.freshToken();
      headers.set('authorization', `Bearer ${this.token}`);
    }
    return this.send(path, { ...init, headers });
  }

  private async freshToken(): Promise<void> {
    if (!this.token) {
      this.renewal ??= this.login()
        .then(() => undefined)
        .finally(() => (this.renewal = undefined));
    } else if (this.expiresAt !== undefined && Date.now() >= this.expiresAt - this.margin()) {
      this.renewal ??= this.refresh().finally(() => (this.renewal = undefined));
    }
    if (this.renewal) await this.renewal;
  }

  /** POST /v1/token_refresh; past the session's refresh window, a new login if it can. */
  private async refresh(): Promise<void> {
    try {
      const res = await this.send('/v1/token_refresh', {
        method: 'POST',
        headers: { authorization: `Bearer ${this.token}` },
      });
      this.adopt(((await this.json(res)) as LoginAnswer).access_token);
    } catch (err) {
      const canLogIn = 'username' in this.options.credentials;
      if (!(err instanceof SluiceClientError) || err.httpStatus !== 401 || !canLogIn) throw err;
      await this.login();
    }
  }

  private margin(): number {
    if (this.options.refreshMarginSeconds !== undefined) {
      return this.options.refreshMarginSeconds * 1000;
    }
    const lifetime = (this.expiresAt ?? 0) - this.issuedAt;
    return Math.min(DEFAULT_MARGIN_MS, lifetime / 2);
  }

  private adopt(token: string): void {
    this.token = token;
    const times = tokenTimes(token);
    this.expiresAt = times.expiresAt;
    // A stored token was issued before this client saw it: its own iat says when.
    this.issuedAt = times.issuedAt ?? Date.now();
    this.options.onToken?.(token);
  }

  /** fetch, with every failure as a SluiceClientError and every error answer thrown. */
  private async send(path: string, init: RequestInit): Promise<Response> {
    let res: Response;
    try {
      res = await this.fetchFn(`${this.url}${path}`, init);
    } catch (cause) {
      throw failure(cause, init.signal ?? undefined, {});
    }
    if (res.ok) return res;
    const text = await res.text().catch(() => '');
    const retryAfter = Number(res.headers.get('retry-after') ?? NaN);
    const retryAfterSeconds = Number.isFinite(retryAfter) ? retryAfter : undefined;
    let envelope: { query_id?: string; status?: Status } | undefined;
    try {
      envelope = JSON.parse(text) as typeof envelope;
    } catch {
      // Not the service's envelope (a proxy's page, say): the HTTP status is all there is.
    }
    if (envelope?.status?.sql_state) {
      throw SluiceClientError.fromStatus(
        envelope.status,
        res.status,
        envelope.query_id ?? res.headers.get('x-query-id') ?? undefined,
        retryAfterSeconds,
      );
    }
    throw new SluiceClientError(`HTTP ${res.status} ${res.statusText}`.trim(), {
      kind: 'status',
      httpStatus: res.status,
      retryAfterSeconds,
    });
  }

  private async json(res: Response): Promise<unknown> {
    try {
      return await res.json();
    } catch (cause) {
      throw new SluiceClientError('the server sent a body that is not JSON', {
        kind: 'protocol',
        httpStatus: res.status,
        cause,
      });
    }
  }

  /**
   * The bytes of a kept result's download; when its connection breaks (not when the caller
   * aborts), waits for the query to end and fetches the rest with `Range: bytes=<received>-`.
   */
  private async *resumed(
    first: Response,
    queryId: string,
    accept: string,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<Uint8Array> {
    let received = 0;
    let res = first;
    for (let attempt = 0; ; attempt++) {
      try {
        for await (const chunk of byteChunks(res.body!)) {
          received += chunk.length;
          yield chunk;
        }
        return;
      } catch (err) {
        if (signal?.aborted || attempt >= RESUME_ATTEMPTS) throw err;
      }
      // Ranges are answered once the query has ended: until then, wait for it.
      await this.ended(queryId, signal);
      res = await this.authorized(`/v1/queries/${encodeURIComponent(queryId)}/result`, {
        method: 'GET',
        headers: { accept, range: `bytes=${received}-`, 'accept-encoding': 'identity' },
        signal,
      });
      if (res.status !== 206) {
        throw new SluiceClientError(`could not resume the download (HTTP ${res.status})`, {
          kind: 'connection',
          httpStatus: res.status,
          queryId,
        });
      }
    }
  }

  /**
   * Resolves once the query is in a final state; fails once the service has not answered for
   * SERVICE_GONE_MS.
   */
  private async ended(queryId: string, signal: AbortSignal | undefined): Promise<void> {
    let failingSince: number | undefined;
    for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
      try {
        const info = await this.queryInfo(queryId);
        failingSince = undefined;
        if (['succeeded', 'failed', 'cancelled'].includes(info.state)) return;
      } catch (err) {
        // The service may be what broke the connection: ask again after a while.
        if (signal?.aborted) throw err;
        failingSince ??= Date.now();
        if (Date.now() - failingSince >= SERVICE_GONE_MS) {
          const why = err instanceof Error ? err.message : String(err);
          throw new SluiceClientError(
            `the download broke, and the service has not answered for ${SERVICE_GONE_MS / 1000} s since: ${why}`,
            { kind: 'connection', queryId, cause: err },
          );
        }
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }

  /** Passes items through; a read that fails becomes a SluiceClientError with the query id. */
  private async *guard<T>(
    items: AsyncGenerator<T>,
    signal: AbortSignal | undefined,
    state: { queryId?: string },
  ): AsyncGenerator<T> {
    try {
      for (;;) {
        let next: IteratorResult<T>;
        try {
          next = await items.next();
        } catch (cause) {
          throw failure(cause, signal, { queryId: state.queryId, httpStatus: 200 });
        }
        if (next.done) return;
        yield next.value;
      }
    } finally {
      await items.return(undefined);
    }
  }
}

/** `segmentDownloads` as given, checked, or the default. */
function segmentDownloadsOf(options: { segmentDownloads?: number }): number {
  const parallel = options.segmentDownloads ?? SEGMENT_DOWNLOADS;
  if (!Number.isInteger(parallel) || parallel < 0) {
    throw new SluiceClientError('segmentDownloads must be a whole number, 0 or more', {
      kind: 'protocol',
    });
  }
  return parallel;
}

/** A web stream of the chunks an iterator gives; cancelling it ends the iterator. */
function bodyOf(chunks: AsyncGenerator<Uint8Array>): ReadableStream<Uint8Array> {
  // No chunk asked for before the body is read (high-water mark 0): a result read by its
  // `segments` instead starts no download here.
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const next = await chunks.next();
          if (next.done) controller.close();
          else controller.enqueue(next.value);
        } catch (err) {
          controller.error(err);
        }
      },
      async cancel() {
        await chunks.return(undefined);
      },
    },
    { highWaterMark: 0 },
  );
}

async function* byteChunks(body: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    // Stops the download when the consumer cancels early; harmless once it has ended.
    await reader.cancel().catch(() => undefined);
  }
}

/** A failed fetch or read: aborted by the caller, or a connection that failed or broke. */
function failure(
  cause: unknown,
  signal: AbortSignal | undefined,
  fields: { queryId?: string; httpStatus?: number },
): SluiceClientError {
  if (cause instanceof SluiceClientError) return cause;
  if (signal?.aborted) {
    return new SluiceClientError('the request was aborted', { kind: 'aborted', ...fields, cause });
  }
  const detail = cause instanceof Error ? (cause.cause ?? cause) : cause;
  const message = detail instanceof Error ? detail.message : String(detail);
  return new SluiceClientError(`connection failed: ${message}`, {
    kind: 'connection',
    ...fields,
    cause,
  });
}

/** Base64 of a string's UTF-8 bytes (btoa alone takes Latin-1 only). */
function base64(text: string): string {
  let binary = '';
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
}
