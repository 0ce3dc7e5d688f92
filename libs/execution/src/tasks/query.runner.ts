import type { FieldDef, PoolClient } from 'pg';
import {
  ApplicationNames,
  LoginRoleError,
  LoginRoleProvisioner,
  PgLogin,
  SERVER_FILE_ROLES,
  WRITE_ALL_ROLE,
  isConnectTimeout,
  isSessionEnded,
} from '@app/access';
import {
  ERROR_CATALOGUE,
  ExecuteJobData,
  SluiceError,
  Status,
  okStatus,
  pgErrorStatus,
  statusOf,
} from '@app/contracts';
import { EncoderColumn, ResultEncoder, RowBatch, createEncoder } from '@app/formats';
import { withSqlComment } from '@app/tracing';
import {
  ProducerStoppedError,
  RESULT_STREAM_LOST,
  ResultStreamLostError,
  SpoolUnavailableError,
  ResultWriter,
  StopReason,
} from '@app/transport';
import { BodyWriter } from './body.writer';
import { DatabaseHandle, DatabaseRegistry } from './database.registry';
import { LoginPools } from './login.pools';
import { ProgressThrottle } from './progress.throttle';
import { isPgError } from './pg.error';
import { StatementLife } from './statement.life';
import { StatementClock, StatementTimings } from './statement.clock';
import { MAX_READ_BYTES, TextCursor, valueTooLarge } from './text.cursor';
import { isStringTooLong } from './oversized-value.guard';

/** What a finished execution reports back to the job processor. */
export interface ExecutionOutcome {
  status: Status;
  rows: number;
  bytes: number;
  /** Its body's bytes before compression: what its thread made (IdleCollection counts them). */
  encodedBytes?: number;
  /** The end is in the registry already: written with the result's last entry. */
  recorded?: boolean;
  /** When its first rows came back and went to the channel (BodyWriter.streamingAt). */
  streamingAt?: number;
  /** When its phases happened in the thread: measured for a traced job only (StatementClock). */
  timings?: StatementTimings;
  /** Its kept result could not be written to the spool (counted in /metrics). */
  spoolWriteFailed?: boolean;
  /**
   * What failed, for the log (the client is told nothing more): when the status is INTERNAL, and
   * when the result stream was lost (what Redis said: a failover, or something that lasts, such
   * as its memory limit).
   */
  cause?: string;
}

/**
 * Asked before each further batch is read: what an export awaits to give way to interactive work
 * (undefined: go on at once).
 */
export type Pace = () => Promise<void> | undefined;

/** What a run may be given beside its job and writer. */
export interface RunOptions {
  /** A database user's own login; absent: the login role provisioned for the job's role. */
  login?: PgLogin;
  /** Awaited before each batch after the first (an export giving way). */
  pace?: Pace;
  /** Hears of what has been produced (throttled). */
  progress?: ProgressThrottle;
  /** Measures the run's phases, for its trace. */
  clock?: StatementClock;
  /** Sent with the statement as a sqlcommenter comment (SLUICE_TRACE_SQLCOMMENTER). */
  traceparent?: string;
}

export interface RunnerSettings {
  defaultFetchSize: number;
  maxEntryBytes: number;
  /** Sluice's own logins (ThreadSettings.ownLogins): no database user may reach them. */
  ownLogins?: string[];
  /** SLUICE_CREDENTIAL_KEY: the key of the application_name statements run under. */
  credentialKey: string;
}

function quoteIdent(name: string): string {
  return '"' + name.replace(/"/g, '""') + '"';
}

function quoteLiteral(text: string): string {
  return "'" + text.replace(/'/g, "''") + "'";
}

/**
 * BEGIN plus the SET LOCALs that give the statement its user's role and settings, and its
 * `applicationName` (ApplicationNames: for whoever watches pg_stat_activity; a cancel never
 * trusts it, as the statement may change it).
 */
export function beginStatements(job: ExecuteJobData, applicationName: string): string[] {
  const parts = [
    job.readOnly ? 'BEGIN READ ONLY' : 'BEGIN',
    `SET LOCAL ROLE ${quoteIdent(job.role)}`,
    `SET LOCAL application_name = ${quoteLiteral(applicationName)}`,
  ];
  if (job.schema !== undefined) parts.push(`SET LOCAL search_path TO ${quoteIdent(job.schema)}`);
  return parts;
}

/**
 * How long a pooled connection of a login role is taken as checked (ms): a role made a superuser,
 * or given a role that reaches the server's files, after its connections were opened stops its
 * users within this.
 */
export const ROLE_RECHECK_MS = 10_000;

/** The most chunks of fetch_size rows one read asks for: a stop or a pace waits for a read at most. */
export const MAX_CHUNKS_PER_READ = 16;

/**
 * How many chunks of the default fetch_size (`fetch`) the next read asks for after `batch`, when
 * the client left fetch_size to the server: as many as fit an entry of
 * the result channel, as PostgreSQL sends them (JSON comes to about as many bytes; more is split). Each read costs a round trip to
 * PostgreSQL and an entry to write and to read; a small fetch_size (1,000 rows of 170 bytes, the
 * default) would pay them every 170 KB. The encoder still marks each chunk (ResultEncoder.rows).
 */
export function chunksPerRead(batch: RowBatch, fetch: number, maxEntryBytes: number): number {
  const rowBytes = Math.max(1, batch.byteEnd - batch.byteStart) / Math.max(1, batch.length);
  const fit = Math.floor(maxEntryBytes / (rowBytes * fetch));
  return Math.max(1, Math.min(MAX_CHUNKS_PER_READ, fit));
}

/** What a client is told when its kept result could not be written to the spool. */
export const SPOOL_WRITE_FAILED =
  'the store that keeps results (SLUICE_SPOOL_URL) could not be written; the query failed and what it wrote was removed: retry the query';

function stopStatus(reason: StopReason): Status {
  const message = new ProducerStoppedError(reason).message;
  if (reason === 'too-large' || reason === 'kept-full' || reason === 'kept-user-full')
    return statusOf('RESULT_TOO_LARGE', message);
  return statusOf(
    reason === 'timeout' ? 'TIME_LIMIT' : 'CANCELLED',
    new ProducerStoppedError(reason).message,
  );
}

/**
 * pg's own error when the connection ends under a query (PostgreSQL or the path to it gone, a
 * pooled connection cut while idle): no SQLSTATE, no system code.
 */
function isConnectionLost(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === 'EPIPE') return true;
  return code === undefined && err instanceof Error && /^Connection terminated/.test(err.message);
}

/** The status a failure is reported with; internals never reach the client. */
export function failureStatus(err: unknown, stopped?: StopReason): Status {
  if (err instanceof ProducerStoppedError) return stopStatus(err.reason);
  if (err instanceof ResultStreamLostError) return statusOf('UNAVAILABLE', RESULT_STREAM_LOST);
  if (err instanceof SpoolUnavailableError) return statusOf('UNAVAILABLE', SPOOL_WRITE_FAILED);
  if (err instanceof LoginRoleError) {
    return statusOf(
      'FORBIDDEN',
      err.kind === 'missing' ? 'the role of this user no longer exists' : err.message,
    );
  }
  // The statement was stopped on purpose (57014 from pg_cancel_backend, 57P01 from
  // pg_terminate_backend when it outlived the cancel): say why.
  if (stopped && isPgError(err) && (err.code === '57014' || err.code === '57P01')) {
    return stopStatus(stopped);
  }
  // Terminated on purpose, and the backend went before it could say so.
  if (stopped && isConnectionLost(err)) return stopStatus(stopped);
  if (err instanceof SluiceError) return err.toStatus();
  // A value that fits a string but whose encoding would not (JSON doubles a quote, say).
  if (isStringTooLong(err)) return valueTooLarge().toStatus();
  if (isConnectTimeout(err)) {
    return statusOf(
      'DB_UNAVAILABLE',
      'database unavailable: it did not answer a new connection in time',
    );
  }
  // Before SQLSTATEs: EPIPE has their shape.
  if (isConnectionLost(err)) {
    return statusOf('DB_UNAVAILABLE', 'database unavailable: the connection to it was lost');
  }
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
  /**
   * Connections of login roles found free of stored settings and of privilege (see
   * withoutRoleSettings), and when they were: a pooled one is checked again after ROLE_RECHECK_MS.
   */
  private readonly checked = new WeakMap<PoolClient, number>();
  private readonly applicationNames: ApplicationNames;

  constructor(
    private readonly databases: DatabaseRegistry,
    private readonly logins: LoginPools,
    private readonly provisioner: LoginRoleProvisioner,
    private readonly settings: RunnerSettings,
  ) {
    this.applicationNames = new ApplicationNames(settings.credentialKey);
  }

  /**
   * Runs `job` over `login`: a database user's own, or (absent) the login role provisioned for
   * the job's role, which is created or repaired here when PostgreSQL does not accept it. `pace`
   * is awaited before each batch after the first; `progress` hears of what has been produced
   * (throttled: ProgressThrottle).
   */
  async run(
    job: ExecuteJobData,
    writer: ResultWriter,
    options: RunOptions = {},
  ): Promise<ExecutionOutcome> {
    const { clock } = options;
    const outcome = await this.runTimed(job, writer, options);
    if (!clock) return outcome;
    clock.mark('endAt');
    return { ...outcome, timings: clock.timings() };
  }

  private async runTimed(
    job: ExecuteJobData,
    writer: ResultWriter,
    { login, pace, progress, clock, traceparent }: RunOptions,
  ): Promise<ExecutionOutcome> {
    const db = this.databases.get(job.database);
    const body = new BodyWriter(writer, job, this.settings.maxEntryBytes);
    // A cancel, the client's loss and the time limit all stop the statement through this, where it
    // is: in PostgreSQL or waiting for the client. Whatever the end, release() comes last.
    const statement = new StatementLife(
      db,
      writer,
      job.timeoutMs,
      job.readOnly ? 'ROLLBACK' : 'COMMIT',
    );
    let encoder: ResultEncoder | undefined;
    let rows = 0;
    /** The write of the last batch encoded: one at a time, settled before anything else is written. */
    let writing: Promise<void> | undefined;
    /** The chunk `writing` writes. */
    let sent: Buffer | undefined;
    // A write awaited here may wait on a slow client: the rows made so far are reported meanwhile.
    const reporting = (waiting: Promise<void> | undefined) =>
      waiting && progress ? progress.during(waiting, made) : waiting;
    const made = () => ({ rows, bytes: body.bytes, streamingAt: body.streamingAt });
    const outcome = (status: Status): ExecutionOutcome => ({
      status,
      rows,
      bytes: body.bytes,
      encodedBytes: body.encodedBytes,
      streamingAt: body.streamingAt,
    });
    try {
      const fetch = job.fetchSize > 0 ? job.fetchSize : this.settings.defaultFetchSize;
      const limit = job.maxRows;
      // A read of 0 rows is PostgreSQL's "all of them": max_rows 0 reads one, to tell whether
      // the cap cut the result, and sends none.
      const firstAsked = limit === undefined ? fetch : Math.max(1, Math.min(fetch, limit));
      clock?.mark('statementAt');
      const opened = await this.open(statement, { job, db, login, rows: firstAsked, traceparent });
      clock?.mark('firstRowsAt');
      const cursor = opened.cursor;
      let batch = opened.batch;
      let truncated = false;
      if (limit === 0) {
        truncated = batch.length > 0;
        batch = RowBatch.EMPTY;
      }
      const fields = cursor.fields;
      const columns = await this.columnsOf(db, fields);
      encoder = createEncoder(
        job.format,
        { queryId: job.queryId, layout: job.layout, columns },
        job.parquetCompression,
      );
      // A first batch short of what was asked for is the whole result (all there is to send).
      if (batch.length < firstAsked) body.holdUntilEnd();
      await body.head(
        columns.map(({ name, type }) => ({ name, type })),
        encoder.head(),
      );
      while (batch.length > 0) {
        rows += batch.length;
        // At max_rows, one more row tells whether the cap cut the result.
        const capped = limit !== undefined && rows >= limit;
        const giving = pace?.();
        if (giving) await giving;
        // A fetch_size the client gave is what each read asks for: its rows come as they are
        // made. An export giving way to interactive work reads one batch between two waits.
        const many =
          job.fetchSize > 0 || giving
            ? fetch
            : fetch * chunksPerRead(batch, fetch, this.settings.maxEntryBytes);
        const asked = limit === undefined ? many : Math.min(many, limit - rows);
        // Wide rows: fewer a read, so that a read stays within half of MAX_READ_BYTES.
        const fitting = Math.max(1, Math.floor(MAX_READ_BYTES / 2 / Math.max(1, cursor.widestRow)));
        const want = capped ? 1 : Math.min(asked, fitting);
        // PostgreSQL produces the next batch while this one is encoded and written, and the
        // previous batch's write goes on while this one is encoded.
        const prefetch = statement.read(want);
        // Awaited below, or by abandon() while still in flight: this only keeps it from counting
        // as unhandled meanwhile.
        prefetch.catch(() => undefined);
        const read = batch;
        const chunk = clock
          ? clock.encoding(() => encoder!.rows(read, fetch))
          : encoder.rows(read, fetch);
        await reporting(writing);
        // The previous chunk is written and nothing keeps it: the encoder may fill its memory
        // again (a large result's chunks then take turns in two buffers instead of new ones).
        if (sent && !body.holding) encoder.reuse?.(sent);
        writing = body.data(batch.length, chunk);
        sent = chunk;
        // Awaited in the next round, after the loop, or before a failure is reported.
        writing.catch(() => undefined);
        const next = await prefetch;
        progress?.tick(made());
        if (capped) {
          truncated = next.length > 0;
          break;
        }
        batch = next;
      }
      await reporting(writing);
      await statement.commit();
      clock?.mark('statementEndAt');
      const tag = cursor.commandTag;
      const reason = fields.length > 0 || !tag ? 'OK' : tag;
      const status = okStatus(
        reason,
        truncated ? { row_count: rows, truncated } : { row_count: rows },
      );
      // A format that writes at its end (Parquet's last row group) waits for the client here.
      await reporting(body.end(status, encoder.end(status) ?? Buffer.alloc(0)));
      return outcome(status);
    } catch (err) {
      // A write still on its way lands first: nothing else is written meanwhile, and its own
      // failure is not the one reported.
      await writing?.catch(() => undefined);
      const status = failureStatus(err, statement.stopReason);
      await statement.abandon(err);
      clock?.mark('statementEndAt');
      // The channel itself failed: the api notices the silence, finds the job ended and says so.
      await this.reportFailure(body, encoder, status).catch(() => undefined);
      // A bug of ours, not PostgreSQL's answer (whose text may quote the user's data).
      const internal =
        status.vendor_code === ERROR_CATALOGUE.INTERNAL.vendorCode && !isPgError(err);
      const cause = internal
        ? String((err as Error)?.stack ?? err)
        : err instanceof ResultStreamLostError || err instanceof SpoolUnavailableError
          ? err.message
          : undefined;
      const failed = outcome(status);
      failed.cause = cause;
      failed.spoolWriteFailed = err instanceof SpoolUnavailableError || undefined;
      return failed;
    } finally {
      await statement.release();
    }
  }

  /**
   * Opens the statement's cursor and reads its first `rows`. A pooled connection whose session
   * PostgreSQL ended while it sat idle (pg_terminate_backend, idle_session_timeout) is only found
   * out when used: if that is what failed, before even the BEGIN completed, nothing of the
   * statement ran, and it is started once more on a new connection.
   */
  private async open(
    statement: StatementLife,
    opening: {
      job: ExecuteJobData;
      db: DatabaseHandle;
      login: PgLogin | undefined;
      rows: number;
      traceparent: string | undefined;
    },
  ): Promise<{ cursor: TextCursor; batch: RowBatch }> {
    const { job, db, login, rows, traceparent } = opening;
    // The traceparent is the service's own: the statement's text is otherwise the user's.
    const text = traceparent ? withSqlComment(job.text, { traceparent }) : job.text;
    for (let attempt = 1; ; attempt++) {
      const cursor = new TextCursor(
        text,
        job.values,
        job.types,
        beginStatements(job, this.applicationNames.of(job.queryId)),
      );
      try {
        const client = await this.connect(job, db, login);
        return { cursor, batch: await statement.start(client, cursor, rows) };
      } catch (err) {
        if (attempt > 1 || cursor.statementReached || !isSessionEnded(err)) throw err;
        statement.discardStart();
      }
    }
  }

  /** The encoder's columns: names, type names and how each type becomes JSON. */
  private async columnsOf(db: DatabaseHandle, fields: FieldDef[]): Promise<EncoderColumn[]> {
    await db.ensureTypes(fields.map((f) => f.dataTypeID));
    return fields.map((f) => ({
      name: f.name,
      type: db.catalog.name(f.dataTypeID),
      oid: f.dataTypeID,
      json: db.catalog.jsonEncoder(f.dataTypeID),
      jsonForm: db.catalog.jsonForm(f.dataTypeID),
      objectJson: db.catalog.objectJson(f.dataTypeID),
    }));
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
    if (!given) client = await this.withoutRoleSettings(client, { job, db, login });
    return client;
  }

  /**
   * A login role's sessions may store settings on it (`ALTER ROLE session_user SET
   * statement_timeout = 1`, after `RESET ROLE` in a DO block): every new connection of that login
   * would start with them, for every user of the role, and the session reset (RESET ALL) returns
   * to them rather than undoing them. And someone may have granted the login role another role.
   * So a new connection whose settings come from its role, or whose login is a member of
   * anything but its user's role, is not used: the control
   * login drops the settings and revokes the memberships (provision, which refuses the role when
   * a membership stays that only its grantor may revoke), and a new connection is taken. A
   * database user's own login keeps its settings (`given`: they are that user's own). Settings
   * only a superuser may set (temp_file_limit) are an operator's limits on the role: they stay.
   */
  private async withoutRoleSettings(
    client: PoolClient,
    { job, db, login }: { job: ExecuteJobData; db: DatabaseHandle; login: PgLogin },
  ): Promise<PoolClient> {
    for (let attempt = 1; ; attempt++) {
      const checkedAt = this.checked.get(client);
      if (checkedAt !== undefined && Date.now() - checkedAt < ROLE_RECHECK_MS) return client;
      let clean = false;
      let privileged = false;
      try {
        // GROUP BY compares with the type's own equality, not an operator found on search_path;
        // every other name and operator is pg_catalog's by name, for the same reason.
        const { rows } = await client.query<{
          source: string;
          granted: boolean;
          privileged: boolean;
        }>(
          `SELECT s.source, EXISTS (
                    SELECT 1 FROM pg_catalog.pg_auth_members m, pg_catalog.pg_roles l
                     WHERE l.rolname OPERATOR(pg_catalog.=) session_user
                       AND m.member OPERATOR(pg_catalog.=) l.oid
                       AND m.roleid OPERATOR(pg_catalog.<>) $1::pg_catalog.regrole::pg_catalog.oid)
                    AS granted,
                  EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                           WHERE r.rolsuper
                             AND pg_catalog.pg_has_role(session_user, r.oid, 'MEMBER'))
                    OR EXISTS (SELECT 1 FROM pg_catalog.unnest($2::pg_catalog.name[]) p
                                WHERE pg_catalog.pg_has_role(session_user, p, 'MEMBER'))
                    OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles w
                                WHERE w.rolname OPERATOR(pg_catalog.=) $3
                                  AND pg_catalog.pg_has_role(session_user, w.oid, 'MEMBER'))
                    AS privileged
             FROM pg_catalog.pg_settings s
            WHERE s.context OPERATOR(pg_catalog.<>) 'superuser'
            GROUP BY s.source`,
          [quoteIdent(job.role), SERVER_FILE_ROLES, WRITE_ALL_ROLE],
        );
        privileged = rows.some((r) => r.privileged);
        clean = !rows.some((r) => r.granted || r.source === 'user' || r.source === 'database user');
      } catch (err) {
        if (isSessionEnded(err)) {
          client.release(true);
          throw err;
        }
        // Whatever else fails the check (a stored statement_timeout of 1 ms) is not clean either.
      }
      // The user's role was made a superuser, or a member of one or of a role that reaches the
      // server's files, after Sluice gave it a login: its users run nothing more, at once.
      if (privileged) {
        client.release(true);
        this.logins.forget(login, job.database);
        throw new SluiceError(
          'FORBIDDEN',
          `role "${job.role}" is now a superuser (or a member of one), reaches the database ` +
            "server's files, or writes every table: its users may not run statements",
        );
      }
      if (clean) {
        this.checked.set(client, Date.now());
        return client;
      }
      client.release(true);
      if (attempt > 1) {
        throw new SluiceError(
          'DB_UNAVAILABLE',
          `the login role of "${job.role}" keeps settings or memberships that could not be removed`,
        );
      }
      await db.provision(this.provisioner, job.role);
      client = await this.logins.connect(login, job.database);
    }
  }

  /**
   * A pooled connection outlives DROP ROLE, NOLOGIN and VALID UNTIL, and a role may be made a
   * superuser, a member of Sluice's own logins, or of a role that reaches the server's files after
   * its login: ask before each statement. The session is the user's own, with the search_path its role stores: every
   * name and operator below is pg_catalog's, by name.
   */
  private async checkLogin(
    client: PoolClient,
    login: PgLogin,
    database: string | undefined,
  ): Promise<void> {
    let ok = false;
    let privileged = false;
    try {
      const { rows } = await client.query<{ ok: boolean; privileged: boolean }>(
        `SELECT r.rolcanlogin AND (r.rolvaliduntil IS NULL
                                   OR r.rolvaliduntil OPERATOR(pg_catalog.>) pg_catalog.now()) AS ok,
                EXISTS (SELECT 1 FROM pg_catalog.pg_roles s
                         WHERE (s.rolsuper
                                OR s.rolname OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.name[]))
                           AND pg_catalog.pg_has_role(r.oid, s.oid, 'MEMBER'))
                  OR EXISTS (SELECT 1 FROM pg_catalog.unnest($2::pg_catalog.name[]) p
                              WHERE pg_catalog.pg_has_role(r.oid, p, 'MEMBER'))
                  OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles w
                              WHERE w.rolname OPERATOR(pg_catalog.=) $4
                                AND pg_catalog.pg_has_role(r.oid, w.oid, 'MEMBER')) AS privileged
           FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) $1`,
        [login.user, SERVER_FILE_ROLES, this.settings.ownLogins ?? [], WRITE_ALL_ROLE],
      );
      ok = rows[0]?.ok === true;
      privileged = rows[0]?.privileged === true && !login.mayBePrivileged;
    } catch (err) {
      // A session that ended in the pool is not a refusal: the caller takes another connection.
      if (isSessionEnded(err)) {
        client.release(true);
        throw err;
      }
      // Whatever else stops the check (a role dropped under the session) refuses the login.
    }
    if (ok && !privileged) return;
    client.release(true);
    this.logins.forget(login, database);
    if (privileged) {
      throw new SluiceError(
        'FORBIDDEN',
        `role "${login.user}" is now a superuser or reaches the database server's files, writes ` +
          "every table, or is (a member of) one of Sluice's own logins: no database user may be " +
          '(SLUICE_ALLOW_PRIVILEGED_DATABASE_USERS)',
      );
    }
    throw new SluiceError('LOGIN_REFUSED', `the database no longer lets "${login.user}" log in`);
  }

  private async reportFailure(
    body: BodyWriter,
    encoder: ResultEncoder | undefined,
    status: Status,
  ): Promise<void> {
    if (!body.started || !encoder) await body.fail(status);
    else await body.end(status, encoder.end(status));
  }
}
