import type { PoolClient } from 'pg';
import {
  Column,
  ERROR_CATALOGUE,
  ExecuteJobData,
  SluiceError,
  Status,
  okStatus,
  pgErrorStatus,
} from '@app/contracts';
import { EncoderColumn, ResultEncoder, TextRow, createEncoder } from '@app/formats';
import { ProducerStoppedError, ResultWriter } from '@app/transport';
import { DatabaseRegistry } from './database.registry';
import { TextCursor } from './text.cursor';

/** What a finished execution reports back to the job processor. */
export interface ExecutionOutcome {
  status: Status;
  rows: number;
  bytes: number;
}

export interface RunnerSettings {
  defaultFetchSize: number;
  maxEntryBytes: number;
}

function quoteIdent(name: string): string {
  return '"' + name.replace(/"/g, '""') + '"';
}

function quoteLiteral(text: string): string {
  return "'" + text.replace(/'/g, "''") + "'";
}

/** BEGIN plus the SET LOCALs that give the statement its user's role and settings. */
export function beginSql(job: ExecuteJobData): string {
  const parts = [
    job.readOnly ? 'BEGIN READ ONLY' : 'BEGIN',
    `SET LOCAL ROLE ${quoteIdent(job.role)}`,
    `SET LOCAL application_name = ${quoteLiteral(`sluice:${job.queryId}`)}`,
  ];
  if (job.schema !== undefined) parts.push(`SET LOCAL search_path TO ${quoteIdent(job.schema)}`);
  return parts.join('; ');
}

interface PgError {
  message: string;
  code?: string;
}

function isPgError(err: unknown): err is PgError {
  return typeof err === 'object' && err !== null && typeof (err as PgError).code === 'string';
}

/** The status a failure is reported with; internals never reach the client. */
export function failureStatus(err: unknown): Status {
  if (err instanceof ProducerStoppedError) {
    const entry = ERROR_CATALOGUE.CANCELLED;
    return { reason: err.message, sql_state: entry.sqlState, vendor_code: entry.vendorCode };
  }
  if (err instanceof SluiceError) return err.toStatus();
  if (isPgError(err) && /^[0-9A-Z]{5}$/.test(err.code!))
    return pgErrorStatus(err.message, err.code);
  const code = (err as { code?: string })?.code;
  if (
    code === 'ECONNREFUSED' ||
    code === 'ECONNRESET' ||
    code === 'ETIMEDOUT' ||
    code === 'ENOTFOUND'
  ) {
    const entry = ERROR_CATALOGUE.DB_UNAVAILABLE;
    return {
      reason: 'database unavailable',
      sql_state: entry.sqlState,
      vendor_code: entry.vendorCode,
    };
  }
  const entry = ERROR_CATALOGUE.INTERNAL;
  return { reason: entry.reason, sql_state: entry.sqlState, vendor_code: entry.vendorCode };
}

/**
 * Runs one statement: BEGIN with the user's role, read with a cursor in batches, encode each
 * batch, write it to the result channel, then the final status. Runs inside a piscina thread.
 */
export class QueryRunner {
  constructor(
    private readonly databases: DatabaseRegistry,
    private readonly settings: RunnerSettings,
  ) {}

  async run(job: ExecuteJobData, writer: ResultWriter): Promise<ExecutionOutcome> {
    let client: PoolClient | undefined;
    let encoder: ResultEncoder | undefined;
    let inTransaction = false;
    let broken = false;
    let rows = 0;
    let bytes = 0;
    const write = async (kind: 'head' | 'data', chunk: Buffer, columns: Column[], n: number) => {
      bytes += chunk.length;
      const max = this.settings.maxEntryBytes;
      if (kind === 'head') {
        await writer.write({ kind, columns, bytes: chunk.subarray(0, max) });
        chunk = chunk.subarray(max);
        if (chunk.length === 0) return;
      }
      // Huge chunks are split so that no stream entry exceeds the cap.
      for (let at = 0; at < chunk.length || (at === 0 && n > 0); at += max) {
        await writer.write({
          kind: 'data',
          rows: at === 0 ? n : 0,
          bytes: chunk.subarray(at, at + max),
        });
      }
    };
    try {
      const db = this.databases.get(job.database);
      try {
        client = await db.pool.connect();
      } catch (err) {
        if (isPgError(err) && err.code === '3D000') this.databases.forget(job.database);
        throw err;
      }
      await client.query(beginSql(job));
      inTransaction = true;
      const cursor = client.query(new TextCursor(job.text, job.values, job.types));
      const fetch = job.fetchSize > 0 ? job.fetchSize : this.settings.defaultFetchSize;
      const limit = job.maxRows;
      let batch: TextRow[] = await cursor.read(
        limit === undefined ? fetch : Math.min(fetch, limit),
      );
      const fields = cursor.fields;
      await db.ensureTypes(fields.map((f) => f.dataTypeID));
      const columns: EncoderColumn[] = fields.map((f) => ({
        name: f.name,
        type: db.catalog.name(f.dataTypeID),
        oid: f.dataTypeID,
        json: db.catalog.jsonEncoder(f.dataTypeID),
      }));
      const plainColumns = columns.map(({ name, type }) => ({ name, type }));
      encoder = createEncoder(job.format, { queryId: job.queryId, layout: job.layout, columns });
      await write('head', encoder.head(), plainColumns, 0);
      let truncated = false;
      while (batch.length > 0) {
        rows += batch.length;
        await write('data', encoder.rows(batch), plainColumns, batch.length);
        if (limit !== undefined && rows >= limit) {
          // One more row tells whether max_rows cut the result.
          truncated = (await cursor.read(1)).length > 0;
          break;
        }
        const want = limit === undefined ? fetch : Math.min(fetch, limit - rows);
        batch = await cursor.read(want);
      }
      await cursor.close();
      await client.query('COMMIT');
      inTransaction = false;
      const tag = cursor.commandTag;
      const reason = fields.length > 0 || !tag ? 'OK' : tag;
      const status = okStatus(
        reason,
        truncated ? { row_count: rows, truncated } : { row_count: rows },
      );
      const tail = encoder.end(status, false) ?? Buffer.alloc(0);
      bytes += tail.length;
      await writer.write({ kind: 'end', status, bytes: tail });
      return { status, rows, bytes };
    } catch (err) {
      const status = failureStatus(err);
      broken = !isPgError(err) && !(err instanceof ProducerStoppedError);
      if (client && inTransaction) {
        await client.query('ROLLBACK').catch(() => {
          broken = true;
        });
      }
      await this.reportFailure(writer, encoder, status, bytes > 0).catch(() => undefined);
      return { status, rows, bytes };
    } finally {
      if (client) {
        // Session state a statement may have changed (SET, LISTEN, temp tables) must not leak.
        if (!broken) await client.query('DISCARD ALL').catch(() => (broken = true));
        client.release(broken);
      }
    }
  }

  private async reportFailure(
    writer: ResultWriter,
    encoder: ResultEncoder | undefined,
    status: Status,
    started: boolean,
  ): Promise<void> {
    if (!started || !encoder) {
      await writer.write({ kind: 'error', status });
      return;
    }
    const tail = encoder.end(status, true);
    await writer.write({
      kind: 'end',
      status,
      bytes: tail ?? Buffer.alloc(0),
      abort: tail === null,
    });
  }
}
