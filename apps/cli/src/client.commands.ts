import { randomBytes } from 'node:crypto';
import { createWriteStream, readFileSync, renameSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { basename, dirname, extname, join } from 'node:path';
import { Readable, Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  EXPORT_FORMATS,
  SEGMENT_DOWNLOADS,
  SluiceClient,
  SluiceClientError,
  type Column,
  type ExportFormat,
  type JsonValue,
  type Params,
  type ParquetCompression,
  type QueryOptions,
  type ResultSegmentBytes,
  type Row,
} from '@sluice/client';
import { UsageError } from './usage.error';
import { CliEnvironment } from './cli.environment';
import { CredentialsStore } from './credentials.store';
import { LoginRequiredError } from './login-required.error';
import { ProgressReporter } from './progress.reporter';
import { resultCsv, resultTable } from './result.table';
import { promptHidden, promptLine, readPiped } from './terminal.prompt';
import { WrittenRanges } from './written.ranges';

export const DEFAULT_URL = 'http://127.0.0.1:8080';

/** Output formats of `sluice query`: `table` on a terminal, `csv` by default when piped. */
export const QUERY_FORMATS = ['table', 'csv', 'json', 'ndjson'] as const;
export type QueryFormat = (typeof QUERY_FORMATS)[number];

/** What a file's extension says its format is. */
const EXTENSIONS: Record<string, ExportFormat> = {
  '.parquet': 'parquet',
  '.arrow': 'arrow',
  '.arrows': 'arrow',
  '.csv': 'csv',
  '.ndjson': 'ndjson',
  '.jsonl': 'ndjson',
  '.json': 'json',
};

/** Options every command that talks to the service takes. */
export interface ConnectionOptions {
  url?: string;
}

export interface StatementOptions extends ConnectionOptions {
  file?: string;
  param?: string[];
  database?: string;
  schema?: string;
  maxRows?: string;
  timeout?: string;
}

/** `sluice login`, `query`, `export`, `queries` and `cancel`: each a thin use of the client. */
export class ClientCommands {
  private readonly store: CredentialsStore;

  constructor(
    private readonly env: CliEnvironment,
    private readonly stdout: NodeJS.WriteStream = process.stdout,
    private readonly stderr: NodeJS.WriteStream = process.stderr,
  ) {
    this.store = new CredentialsStore(env.configDir);
  }

  async login(options: ConnectionOptions & { user?: string }): Promise<void> {
    // Scripts and CI have no terminal: the environment says everything, nothing is asked.
    const interactive = Boolean(process.stdin.isTTY && this.stderr.isTTY);
    const stored = this.store.load();
    const fallbackUrl = options.url ?? this.env.url ?? stored?.url ?? DEFAULT_URL;
    const url =
      interactive && !options.url && !this.env.url
        ? await promptLine('Sluice URL', fallbackUrl)
        : fallbackUrl;
    const user =
      options.user ??
      this.env.user ??
      (interactive ? await promptLine('User', stored?.username) : undefined);
    if (!user) throw new UsageError('no user: set SLUICE_USER (or pass --user)');
    // Piped, as `users add` takes it: `echo "$PW" | sluice login`. A terminal on stdin with
    // stderr redirected is not read: it would wait for an end of input nobody types.
    const password =
      this.env.password ??
      (interactive
        ? await promptHidden('Password: ')
        : process.stdin.isTTY
          ? undefined
          : (await readPiped()) || undefined);
    if (password === undefined) {
      throw new UsageError(
        'no password: pipe it on stdin or set SLUICE_PASSWORD (it is never taken from the command line)',
      );
    }
    const client = new SluiceClient({ url, credentials: { username: user, password } });
    const token = await client.login();
    this.store.save({ url, username: user, token });
    this.stderr.write(`logged in to ${url} as ${user}; token kept in ${this.store.path}\n`);
  }

  async query(sqlArg: string | undefined, options: StatementOptions & { format?: string }) {
    const sql = this.statement(sqlArg, options);
    const format = (options.format ?? (this.stdout.isTTY ? 'table' : 'csv')) as QueryFormat;
    if (!QUERY_FORMATS.includes(format)) {
      throw new UsageError(`--format must be one of ${QUERY_FORMATS.join(', ')}`);
    }
    const client = this.client(options);
    const params = parseParams(options.param);
    if (format === 'csv') {
      await this.download(client, {
        sql,
        params,
        format: 'csv',
        options: this.queryOptions(options),
      });
      return;
    }
    await this.interruptible(client, async (signal, started) => {
      // Cleared before the table: the terminal then shows the table alone, on a line of its own
      // (nothing of the progress line, nor what npx drew on that line before it ran us).
      const progress = new ProgressReporter(this.stderr, { clearOnStop: format === 'table' });
      try {
        const stream = client.stream(sql, params, { ...this.queryOptions(options), signal });
        const rows: Row[] = [];
        let names: string[] | undefined;
        let count = 0;
        for await (const row of stream) {
          started(stream.queryId);
          if (format === 'ndjson') {
            names ??= columnNames(stream.schema!);
            await write(this.stdout, `${JSON.stringify(asObject(names, row))}\n`);
          } else {
            rows.push(row);
          }
          progress.update({ rows: ++count, bytes: stream.bytes });
        }
        progress.stop();
        const schema = stream.schema ?? [];
        if (format === 'json') {
          const objects = rows.map((row) => asObject(columnNames(schema), row));
          await write(this.stdout, `${JSON.stringify(objects, null, 2)}\n`);
        } else if (format === 'table') {
          if (schema.length > 0) await write(this.stdout, resultTable(schema, rows));
          // On stderr: stdout holds the table alone, to copy or redirect.
          const count = `(${rows.length} ${rows.length === 1 ? 'row' : 'rows'})`;
          this.stderr.write(
            `${schema.length === 0 && stream.status?.reason ? stream.status.reason : count}\n`,
          );
        }
      } finally {
        progress.stop();
      }
    });
  }

  async export(
    sqlArg: string | undefined,
    options: StatementOptions & {
      output?: string;
      format?: string;
      compression?: ParquetCompression;
      keep?: boolean;
      parallel?: string;
    },
  ) {
    const sql = this.statement(sqlArg, options);
    const toStdout = options.output === undefined || options.output === '-';
    const format = (options.format ??
      (toStdout ? undefined : EXTENSIONS[extname(options.output!).toLowerCase()])) as
      ExportFormat | undefined;
    if (!format || !(format in EXPORT_FORMATS)) {
      throw new UsageError(
        `cannot tell the format${toStdout ? '' : ` of ${options.output}`}: pass --format ${Object.keys(EXPORT_FORMATS).join('|')}`,
      );
    }
    if (options.compression !== undefined && format !== 'parquet') {
      throw new UsageError(`--compression is for Parquet, not ${format}`);
    }
    if (options.parallel !== undefined && !options.keep) {
      throw new UsageError('--parallel is for a kept result: add --keep');
    }
    const kept: QueryOptions = options.keep
      ? {
          waitTimeout: 0,
          segmentDownloads:
            options.parallel === undefined ? undefined : integer(options.parallel, '--parallel'),
        }
      : {};
    const client = this.client(options);
    await this.download(client, {
      sql,
      params: parseParams(options.param),
      format,
      options: {
        ...this.queryOptions(options),
        ...kept,
        lane: 'export',
        parquetCompression: options.compression,
      },
      output: toStdout ? undefined : options.output,
    });
  }

  /** As `query` prints: a table on a terminal, CSV when piped, or the --format asked. */
  async queries(
    options: ConnectionOptions & { json?: boolean; format?: QueryFormat },
  ): Promise<void> {
    if (options.json && options.format !== undefined && options.format !== 'json') {
      throw new UsageError('--json is --format json: give one of them');
    }
    const format = options.json
      ? 'json'
      : (options.format ?? (this.stdout.isTTY ? 'table' : 'csv'));
    const list = await this.client(options).queries();
    if (format === 'json') {
      await write(this.stdout, `${JSON.stringify(list, null, 2)}\n`);
      return;
    }
    if (format === 'ndjson') {
      await write(this.stdout, list.map((q) => `${JSON.stringify(q)}\n`).join(''));
      return;
    }
    const columns = [
      'query_id',
      'owner',
      'state',
      'lane',
      'elapsed_ms',
      'rows',
      'bytes',
      'statement',
    ];
    const rows = list.map((q) => columns.map((c) => (q[c as keyof typeof q] ?? null) as JsonValue));
    await write(
      this.stdout,
      format === 'csv'
        ? resultCsv(columns, rows)
        : resultTable(
            columns.map((name) => ({ name, type: '' })),
            rows,
          ),
    );
  }

  async cancel(queryId: string, options: ConnectionOptions): Promise<void> {
    const info = await this.client(options).cancel(queryId);
    await write(this.stdout, `${info.query_id} ${info.state}\n`);
  }

  /**
   * Streams a result's bytes to a file or stdout. A file is written beside its final name and
   * renamed when complete, so a failed or interrupted export never leaves a partial file under
   * the name asked for.
   */
  private async download(
    client: SluiceClient,
    {
      sql,
      params,
      format,
      options,
      output,
    }: {
      sql: string;
      params: Params | undefined;
      format: ExportFormat;
      options: QueryOptions;
      /** The file written; stdout when none. */
      output?: string;
    },
  ): Promise<void> {
    const temp = output
      ? join(dirname(output), `.${basename(output)}.${randomBytes(4).toString('hex')}.part`)
      : undefined;
    const progress = new ProgressReporter(this.stderr);
    let poll: NodeJS.Timeout | undefined;
    try {
      await this.interruptible(client, async (signal, started) => {
        const result = await client.export(sql, params, format, { ...options, signal });
        started(result.queryId);
        if (result.source === 'segments') {
          const parallel = options.segmentDownloads ?? SEGMENT_DOWNLOADS;
          progress.update({ source: `from the store, ${parallel} at a time` });
        }
        if (this.stderr.isTTY) {
          // Rows are counted by the server (a Parquet file cannot be counted as it arrives).
          poll = setInterval(() => {
            client.queryInfo(result.queryId).then(
              (info) => progress.update({ rows: info.rows }),
              // The next poll tries again; the progress line is no reason to fail an export.
              () => undefined,
            );
          }, 500);
        }
        let bytes = 0;
        const wrote = (n: number) => {
          bytes += n;
          progress.update({ bytes });
        };
        const cut = async (err: unknown) => {
          throw await whyCut(err, { client, queryId: result.queryId, signal });
        };
        if (temp && result.segments) {
          // From the store into a file: each piece at its offset as it comes.
          await writeAtOffsets(result.segments, temp, wrote).catch(cut);
        } else {
          const counter = new Transform({
            transform(chunk: Buffer, _encoding, done) {
              wrote(chunk.length);
              done(null, chunk);
            },
          });
          const sink: Writable = temp ? createWriteStream(temp) : this.stdout;
          await pipeline(Readable.fromWeb(result.body), counter, sink, {
            end: temp !== undefined,
          }).catch(cut);
        }
        if (temp) renameSync(temp, output!);
        const info = await client.queryInfo(result.queryId).catch(() => undefined);
        progress.update({ bytes, rows: info?.rows });
      });
    } finally {
      clearInterval(poll);
      progress.stop();
      if (temp) rmSync(temp, { force: true });
    }
  }

  /**
   * Runs work that Ctrl-C may interrupt: SIGINT aborts the request (the server cancels the
   * statement when its client goes away) and, once the query id is known, also cancels it by id
   * in case the disconnect is not seen at once (a proxy between them, say).
   */
  private async interruptible(
    client: SluiceClient,
    work: (signal: AbortSignal, started: (queryId: string | undefined) => void) => Promise<void>,
  ): Promise<void> {
    const controller = new AbortController();
    let queryId: string | undefined;
    const onSigint = () => controller.abort();
    process.on('SIGINT', onSigint);
    try {
      await work(controller.signal, (id) => (queryId ??= id || undefined));
    } catch (err) {
      if (!controller.signal.aborted) throw err;
      if (queryId) {
        const timeout = new Promise((resolve) => setTimeout(resolve, 3_000).unref());
        // Best effort: the disconnect alone already cancels the statement.
        await Promise.race([client.cancel(queryId).catch(() => undefined), timeout]);
      }
      throw new SluiceClientError('interrupted: the query was cancelled', {
        kind: 'aborted',
        queryId,
        cause: err,
      });
    } finally {
      process.off('SIGINT', onSigint);
    }
  }

  /** The stored login (kept fresh as the client refreshes it), or credentials from the env. */
  private client(options: ConnectionOptions): SluiceClient {
    const stored = this.store.load();
    const url = options.url ?? this.env.url ?? stored?.url;
    if (stored && stored.url === url) {
      return new SluiceClient({
        url,
        credentials: { token: stored.token },
        onToken: (token) => {
          if (token !== stored.token) this.store.save({ ...stored, token });
        },
      });
    }
    if (url && this.env.user && this.env.password) {
      return new SluiceClient({
        url,
        credentials: { username: this.env.user, password: this.env.password },
      });
    }
    throw new LoginRequiredError(
      `not logged in${url ? ` to ${url}` : ''}: run sluice login (or set SLUICE_URL, SLUICE_USER and SLUICE_PASSWORD)`,
    );
  }

  private statement(sql: string | undefined, options: StatementOptions): string {
    if (options.file !== undefined && sql !== undefined) {
      throw new UsageError('give the statement as an argument or with -f, not both');
    }
    const text =
      options.file !== undefined
        ? readFileSync(options.file === '-' ? 0 : options.file, 'utf8')
        : sql;
    if (!text?.trim())
      throw new UsageError('no statement: give it as an argument or with -f file.sql');
    return text;
  }

  private queryOptions(options: StatementOptions): QueryOptions {
    return {
      database: options.database,
      schema: options.schema,
      maxRows: options.maxRows === undefined ? undefined : integer(options.maxRows, '--max-rows'),
      timeout: options.timeout === undefined ? undefined : integer(options.timeout, '--timeout'),
    };
  }
}

/** How long a body cut short waits for its query's record to show why (ms). */
const CUT_SETTLE_MS = 3_000;

/**
 * Why an export's body was cut short. The server closes the connection of a failed export (a
 * binary body has no room for a final status), so the client sees a broken connection: the
 * query's own record then says whether the statement failed (with its reason and SQLSTATE, exit
 * 1) rather than the service being out of reach (exit 4).
 */
async function whyCut(
  err: unknown,
  { client, queryId, signal }: { client: SluiceClient; queryId: string; signal: AbortSignal },
): Promise<unknown> {
  if (!(err instanceof SluiceClientError) || err.kind !== 'connection' || !queryId) return err;
  const until = Date.now() + CUT_SETTLE_MS;
  while (!signal.aborted && Date.now() < until) {
    const info = await client.queryInfo(queryId).catch(() => undefined);
    if (info?.state === 'failed' && info.status) {
      return SluiceClientError.fromStatus(info.status, err.httpStatus ?? 200, queryId);
    }
    if (info && ['succeeded', 'cancelled'].includes(info.state)) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return err;
}

/** `--param name=value`: the value as JSON when it is JSON (42, true, null, "42"), else text. */
export function parseParams(pairs: string[] | undefined): Params | undefined {
  if (!pairs || pairs.length === 0) return undefined;
  const params: Params = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new UsageError(`--param takes name=value, not ${pair}`);
    const raw = pair.slice(at + 1);
    let value: JsonValue;
    try {
      value = JSON.parse(raw) as JsonValue;
    } catch {
      value = raw;
    }
    params[pair.slice(0, at)] = value;
  }
  return params;
}

function integer(text: string, option: string): number {
  if (!/^\d+$/.test(text)) throw new UsageError(`${option} takes a whole number`);
  return Number(text);
}

function columnNames(schema: Column[]): string[] {
  return schema.map((c) => c.name);
}

function asObject(names: string[], row: Row): Record<string, JsonValue> {
  return Object.fromEntries(names.map((name, i) => [name, row[i]]));
}

/** Writes with backpressure, so a large result piped to a slow reader is not held in memory. */
function write(stream: NodeJS.WritableStream, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    if (stream.write(text)) resolve();
    else {
      stream.once('drain', resolve);
      stream.once('error', reject);
    }
  });
}

/**
 * Writes a result's segments into `file`, each piece at its offset as it comes (one `writev` a
 * piece), telling `wrote` the bytes of the file each piece covered for the first time, once
 * written. The file is a temporary one, renamed only when the whole result is in it: a segment
 * that fails fails the export. (Also what bench/spool.mjs times as the command's download.)
 */
export async function writeAtOffsets(
  segments: AsyncIterable<ResultSegmentBytes>,
  file: string,
  wrote: (bytes: number) => void,
): Promise<void> {
  const handle = await open(file, 'w');
  const written = new WrittenRanges();
  try {
    for await (const { offset, parts } of segments) {
      const size = parts.reduce((sum, part) => sum + part.byteLength, 0);
      const { bytesWritten } = await handle.writev(parts, offset);
      // Never a hole where a segment should be.
      if (bytesWritten !== size) {
        throw new Error(`wrote ${bytesWritten} of a piece's ${size} bytes at ${offset}`);
      }
      wrote(written.add(offset, offset + size));
    }
  } finally {
    await handle.close();
  }
}
