import type { PoolClient } from 'pg';
import { LoginRoleError, LoginRoleProvisioner, PgLogin } from '@app/access';
import {
  ExecuteJobData,
  SluiceError,
  Status,
  okStatus,
  pgErrorStatus,
  statusOf,
} from '@app/contracts';
import { EncoderColumn, ResultEncoder, TextRow, createEncoder } from '@app/formats';
import { ProducerStoppedError, ResultWriter, StopReason } from '@app/transport';
import { BodyWriter } from './body.writer';
import { DatabaseHandle, DatabaseRegistry } from './database.registry';
import { LoginPools } from './login.pools';
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

/** The application_name a query's statement runs under: what a cancel checks before it signals. */
export function applicationNameOf(queryId: string): string {
  return `sluice:${queryId}`;
}

/** BEGIN plus the SET LOCALs that give the statement its user's role and settings. */
export function beginSql(job: ExecuteJobData): string {
  const parts = [
    job.readOnly ? 'BEGIN READ ONLY' : 'BEGIN',
    `SET LOCAL ROLE ${quoteIdent(job.role)}`,
    `SET LOCAL application_name = ${quoteLiteral(applicationNameOf(job.queryId))}`,
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

function stopStatus(reason: StopReason): Status {
  return statusOf(
    reason === 'timeout' ? 'TIME_LIMIT' : 'CANCELLED',
    new ProducerStoppedError(reason).message,
  );
}

/** The status a failure is reported with; internals never reach the client. */
export function failureStatus(err: unknown, stopped?: StopReason): Status {
  if (err instanceof ProducerStoppedError) return stopStatus(err.reason);
  if (err instanceof LoginRoleError) {
    return statusOf(
      'FORBIDDEN',
      err.kind === 'missing' ? 'the role of this user no longer exists' : err.message,
    );
  }
  // The statement was cancelled on purpose (57014 from pg_cancel_backend): say why.
  if (stopped && isPgError(err) && err.code === '57014') return stopStatus(stopped);
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
    return statusOf('DB_UNAVAILABLE', 'database unavailable');
  }
  return statusOf('INTERNAL');
}

/**
 * Runs one statement: BEGIN with the user's role, read with a cursor in batches, encode each
 * batch, write it to the result channel, then the final status. Runs inside a piscina thread.
 */
export class QueryRunner {
  constructor(
    private readonly databases: DatabaseRegistry,
    private readonly logins: LoginPools,
    private readonly provisioner: LoginRoleProvisioner,
    private readonly settings: RunnerSettings,
  ) {}

  /**
   * Runs `job` over `login`: a database user's own, or (absent) the login role provisioned for
   * the job's role, which is created or repaired here when PostgreSQL does not accept it.
   */
  async run(job: ExecuteJobData, writer: ResultWriter, login?: PgLogin): Promise<ExecutionOutcome> {
    let client: PoolClient | undefined;
    let cursor: TextCursor | undefined;
    let prefetch: Promise<TextRow[]> | undefined;
    let encoder: ResultEncoder | undefined;
    let inTransaction = false;
    let broken = false;
    let rows = 0;
    const body = new BodyWriter(writer, job, this.settings.maxEntryBytes);
    const db = this.databases.get(job.database);
    // Cancels, client loss and time limits stop the statement where it is: in PostgreSQL or waiting.
    let stopped: StopReason | undefined;
    let inStatement = false;
    const stop = (reason: StopReason) => {
      if (stopped) return;
      stopped = reason;
      writer.interrupt(reason);
      if (inStatement) void this.cancel(db, client, job);
    };
    const unwatch = writer.watch(stop);
    const deadline = job.timeoutMs ? setTimeout(() => stop('timeout'), job.timeoutMs) : undefined;
    const read = async (from: TextCursor, n: number): Promise<TextRow[]> => {
      if (stopped) throw new ProducerStoppedError(stopped);
      inStatement = true;
      try {
        return await from.read(n);
      } finally {
        inStatement = false;
      }
    };
    try {
      client = await this.connect(job, db, login);
      await client.query(beginSql(job));
      inTransaction = true;
      cursor = client.query(new TextCursor(job.text, job.values, job.types));
      const fetch = job.fetchSize > 0 ? job.fetchSize : this.settings.defaultFetchSize;
      const limit = job.maxRows;
      let batch: TextRow[] = await read(
        cursor,
        limit === undefined ? fetch : Math.min(fetch, limit),
      );
      const fields = cursor.fields;
      await db.ensureTypes(fields.map((f) => f.dataTypeID));
      const columns: EncoderColumn[] = fields.map((f) => ({
        name: f.name,
        type: db.catalog.name(f.dataTypeID),
        oid: f.dataTypeID,
        json: db.catalog.jsonEncoder(f.dataTypeID),
        objectJson: db.catalog.objectJson(f.dataTypeID),
      }));
      const plainColumns = columns.map(({ name, type }) => ({ name, type }));
      encoder = createEncoder(job.format, { queryId: job.queryId, layout: job.layout, columns });
      // A first batch short of what was asked for is the whole result.
      const firstAsked = limit === undefined ? fetch : Math.min(fetch, limit);
      if (batch.length < firstAsked) body.holdUntilEnd();
      await body.head(plainColumns, encoder.head());
      let truncated = false;
      while (batch.length > 0) {
        rows += batch.length;
        // At max_rows, one more row tells whether the cap cut the result.
        const capped = limit !== undefined && rows >= limit;
        const want = capped ? 1 : limit === undefined ? fetch : Math.min(fetch, limit - rows);
        // PostgreSQL produces the next batch while this one is encoded and written.
        prefetch = read(cursor, want);
        // Awaited below (or in the catch): this only keeps it from counting as unhandled meanwhile.
        prefetch.catch(() => undefined);
        await body.data(batch.length, encoder.rows(batch));
        const next = await prefetch;
        prefetch = undefined;
        if (capped) {
          truncated = next.length > 0;
          break;
        }
        batch = next;
      }
      await cursor.close();
      if (stopped) throw new ProducerStoppedError(stopped);
      await client.query('COMMIT');
      inTransaction = false;
      unwatch();
      const tag = cursor.commandTag;
      const reason = fields.length > 0 || !tag ? 'OK' : tag;
      const status = okStatus(
        reason,
        truncated ? { row_count: rows, truncated } : { row_count: rows },
      );
      await body.end(status, encoder.end(status, false) ?? Buffer.alloc(0));
      return { status, rows, bytes: body.bytes };
    } catch (err) {
      unwatch();
      const status = failureStatus(err, stopped);
      broken = !isPgError(err) && !(err instanceof ProducerStoppedError);
      // A read still on its way must land before the portal can be closed: cut it short.
      if (prefetch) {
        if (inStatement) await this.cancel(db, client, job);
        await prefetch.catch(() => undefined); // its failure is the one being reported
      }
      // A suspended portal holds the connection: nothing else runs on it until it is closed.
      if (cursor?.open) {
        await cursor.close().catch(() => {
          broken = true;
        });
      }
      if (client && inTransaction && !broken) {
        await client.query('ROLLBACK').catch(() => {
          broken = true;
        });
      }
      // The channel itself failed: the api notices the silence, finds the job ended and says so.
      await this.reportFailure(body, encoder, status).catch(() => undefined);
      return { status, rows, bytes: body.bytes };
    } finally {
      unwatch();
      if (deadline) clearTimeout(deadline);
      if (client) {
        // Session state a statement may have changed (SET, LISTEN, temp tables) must not leak.
        if (!broken) await client.query('DISCARD ALL').catch(() => (broken = true));
        client.release(broken);
      }
    }
  }

  private async connect(
    job: ExecuteJobData,
    db: DatabaseHandle,
    given: PgLogin | undefined,
  ): Promise<PoolClient> {
    const login = given ?? this.provisioner.serviceLogin(job.role);
    let client: PoolClient;
    try {
      client = await this.logins.connect(login, job.database);
    } catch (err) {
      if (!isPgError(err)) throw err;
      if (err.code === '3D000') {
        this.databases.forget(job.database);
        this.logins.forget(login, job.database);
      }
      const refused = err.code === '28P01' || err.code === '28000';
      if (!refused || given) throw err;
      // A login role not made yet (a user from before, a role renamed) or with another password.
      this.logins.forget(login, job.database);
      await db.provision(this.provisioner, job.role);
      client = await this.logins.connect(login, job.database);
    }
    if (login.checkOnUse) await this.checkLogin(client, login, job.database);
    return client;
  }

  /** A pooled connection outlives DROP ROLE, NOLOGIN and VALID UNTIL: ask before each statement. */
  private async checkLogin(
    client: PoolClient,
    login: PgLogin,
    database: string | undefined,
  ): Promise<void> {
    let ok = false;
    try {
      const { rows } = await client.query<{ ok: boolean }>(
        `SELECT rolcanlogin AND (rolvaliduntil IS NULL OR rolvaliduntil > now()) AS ok
           FROM pg_roles WHERE rolname = $1`,
        [login.user],
      );
      ok = rows[0]?.ok === true;
    } catch {
      // Whatever stops the check (a role dropped under the session) refuses the login.
    }
    if (ok) return;
    client.release(true);
    this.logins.forget(login, database);
    throw new SluiceError('LOGIN_REFUSED', `the database no longer lets "${login.user}" log in`);
  }

  /** Cancels this query's statement, and no other that its connection may have moved on to. */
  private async cancel(
    db: DatabaseHandle,
    client: PoolClient | undefined,
    job: ExecuteJobData,
  ): Promise<void> {
    const pid = (client as { processID?: number } | undefined)?.processID;
    if (!pid) return;
    // A failed cancel leaves the statement to its time limit, its client check or its end.
    await db.cancelStatement(pid, applicationNameOf(job.queryId)).catch(() => false);
  }

  private async reportFailure(
    body: BodyWriter,
    encoder: ResultEncoder | undefined,
    status: Status,
  ): Promise<void> {
    if (!body.started || !encoder) await body.fail(status);
    else await body.end(status, encoder.end(status, true));
  }
}
