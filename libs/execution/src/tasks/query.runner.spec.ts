import { Client } from 'pg';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { MessageChannel } from 'node:worker_threads';
import { ExecuteJobData, ResultRecord, Status, httpStatusOf } from '@app/contracts';
import { ApplicationNames, LoginRoleProvisioner, PgLogin } from '@app/access';
import { NdjsonEncoder, RowBatch } from '@app/formats';
import {
  FlowWindow,
  InProcessResultChannel,
  PortResultWriter,
  Produced,
  RESULT_STREAM_LOST,
  ResultReader,
  ResultStreamLostError,
  ResultWriter,
  StopReason,
} from '@app/transport';
import { connectTestDatabase, testDatabaseUrl } from '@test/settings';
import { TcpProxy, endSessionsBehind, proxyToTestDatabase } from '@test/support/tcp.proxy';
import { DatabaseRegistry } from './database.registry';
import { LoginPools } from './login.pools';
import { ProgressThrottle } from './progress.throttle';
import { ExecutionOutcome, Pace, QueryRunner, failureStatus } from './query.runner';
import { StatementLife } from './statement.life';

const CREDENTIAL_KEY = 'a-credential-key-of-this-spec-only-32';
/** The application_name the runner gives a job's statement. */
const applicationNames = new ApplicationNames(CREDENTIAL_KEY);

/**
 * The runner's three ways to stop a statement — a cancel, its time limit, its client lost or idle
 * — each while the statement runs in PostgreSQL and while the runner waits for the client to
 * read. Real PostgreSQL (the local test database), the in-process result channel.
 *
 * The statement runs over the test URL's own login (a superuser) given as the job's login, with
 * its own name as the job's role: the login roles that the runner provisions need the control
 * login set-up of the e2e suite (test/e2e/support/roles.ts), which is not what is tested here.
 */
jest.setTimeout(20_000);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const url = new URL(testDatabaseUrl);
const login: PgLogin = {
  user: decodeURIComponent(url.username),
  password: decodeURIComponent(url.password),
};
/** A statement that runs far longer than any test: only a stop ends it in time. */
const LONG_SLEEP = 'SELECT pg_sleep(8)';
/** Far more rows than a window holds: the runner must wait for the client to read. */
const MANY_ROWS = 'SELECT g, repeat($$x$$, 100) AS pad FROM generate_series(1, 100000) g';

let control: Client;
let databases: DatabaseRegistry;
let logins: LoginPools;
let runner: QueryRunner;
let channel: InProcessResultChannel;

beforeAll(async () => {
  // Fails the spec, loudly, when the test database is not there.
  control = await connectTestDatabase();
});

beforeEach(() => {
  databases = new DatabaseRegistry(testDatabaseUrl);
  logins = new LoginPools({
    baseUrl: testDatabaseUrl,
    poolSize: 2,
    maxConnections: 4,
    idleTimeoutMs: 10_000,
  });
  // Never asked: every job here comes with its login.
  const provisioner = new LoginRoleProvisioner('unused-in-this-spec');
  runner = new QueryRunner(databases, logins, provisioner, {
    defaultFetchSize: 100,
    maxEntryBytes: 1 << 20,
    credentialKey: CREDENTIAL_KEY,
  });
  channel = new InProcessResultChannel(5_000);
});

afterEach(async () => {
  await channel.close();
  logins.forget(login, undefined);
  const handle = databases.get(undefined);
  databases.forget(undefined);
  await handle.close();
  while (logins.size > 0) await sleep(10);
});

afterAll(async () => {
  await control.end();
});

function jobOf(text: string, extra: Partial<ExecuteJobData> = {}): ExecuteJobData {
  return {
    queryId: randomUUID(),
    text,
    values: [],
    types: [],
    username: 'runner-spec',
    role: login.user,
    readOnly: false,
    format: 'ndjson',
    layout: 'array',
    fetchSize: 0,
    lane: 'interactive',
    enqueuedAt: Date.now(),
    ...extra,
  };
}

/**
 * Passes records on to `inner`, each data record after `delayMs`: a slow result stream. The
 * `failAt`-th data record fails instead, as a write to a stream that broke. Counts the writes in
 * flight and logs each data write's start and end.
 */
class SlowWriter implements ResultWriter {
  readonly endRecorded = false;
  readonly log: string[] = [];
  maxInFlight = 0;
  private inFlight = 0;
  private dataWrites = 0;

  constructor(
    private readonly inner: ResultWriter,
    private readonly delayMs: number,
    private readonly failAt?: number,
    private readonly failure = () => new Error('the result stream broke'),
  ) {}

  async write(record: ResultRecord): Promise<void> {
    if (record.kind !== 'data') return this.inner.write(record);
    const n = (this.dataWrites += 1);
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    this.log.push(`write ${n}`);
    try {
      await sleep(this.delayMs);
      if (n === this.failAt) throw this.failure();
      await this.inner.write(record);
      this.log.push(`written ${n}`);
    } finally {
      this.inFlight -= 1;
    }
  }

  writeFinal(records: ResultRecord[]): Promise<void> {
    return this.inner.writeFinal(records);
  }

  watch(onStop: (reason: StopReason) => void): () => void {
    return this.inner.watch(onStop);
  }

  interrupt(reason: StopReason): void {
    this.inner.interrupt(reason);
  }
}

/** Starts `job` with a reader on the other side of the channel, as the worker pool does. */
function start(
  job: ExecuteJobData,
  window: Partial<FlowWindow> = {},
  pace?: Pace,
  wrap: (writer: ResultWriter) => ResultWriter = (writer) => writer,
  as: PgLogin = login,
): { reader: ResultReader; running: Promise<ExecutionOutcome> } {
  const reader = channel.open(job.queryId, { onSilence: () => Promise.resolve(undefined) });
  const { port1, port2 } = new MessageChannel();
  channel.attach(job.queryId, port1);
  const writer = new PortResultWriter(port2, {
    chunks: 4,
    bytes: 1 << 20,
    idleTimeoutMs: 10_000,
    ...window,
  });
  return { reader, running: runner.run(job, wrap(writer), { login: as, pace }) };
}

/** What the reader has left, through the terminal record. */
async function drain(reader: ResultReader): Promise<ResultRecord[]> {
  const records: ResultRecord[] = [];
  for (;;) {
    const record = await reader.next();
    records.push(record);
    if (record.kind === 'end' || record.kind === 'error') return records;
  }
}

function statusOfLast(records: ResultRecord[]): Status {
  const last = records[records.length - 1];
  if (last.kind !== 'end' && last.kind !== 'error') throw new Error(`ends with ${last.kind}`);
  return last.status;
}

/** Waits until the statement of `job` is in PostgreSQL (`active`: running there); its backend. */
async function backendOf(job: ExecuteJobData, state?: 'active'): Promise<number> {
  const started = Date.now();
  for (;;) {
    const { rows } = await control.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity
        WHERE application_name = $1 AND ($2::text IS NULL OR state = $2)`,
      [applicationNames.of(job.queryId), state ?? null],
    );
    if (rows.length === 1) return rows[0].pid;
    if (Date.now() - started > 5_000) throw new Error('the statement did not start');
    await sleep(20);
  }
}

/**
 * Nothing of `job` runs in PostgreSQL any more, and its connection, back in the pool (not
 * dropped), takes the next statement: no transaction or portal was left open on it.
 */
async function expectCleanAfter(job: ExecuteJobData, backend: number): Promise<void> {
  const { rows } = await control.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1`,
    [applicationNames.of(job.queryId)],
  );
  expect(rows[0].n).toBe(0);
  // The pooled connection takes the next statement (no transaction or portal left on it).
  const next = jobOf('SELECT pg_backend_pid() AS pid, 41 + 1 AS answer');
  const { reader, running } = start(next);
  const outcome = await running;
  expect(outcome.status).toMatchObject({ reason: 'OK', vendor_code: 0 });
  const records = await drain(reader);
  expect(
    Buffer.concat(records.map((r) => (r.kind === 'error' ? Buffer.alloc(0) : r.bytes))).toString(),
  ).toContain(`[${backend},42]`);
  await reader.close();
}

/** The rows of an ndjson body's data lines. */
function rowsIn(records: ResultRecord[]): unknown[][] {
  const body = Buffer.concat(
    records.map((r) => (r.kind === 'error' ? Buffer.alloc(0) : r.bytes)),
  ).toString();
  return body
    .split('\n')
    .filter((line) => line.startsWith('{"data"'))
    .flatMap((line) => (JSON.parse(line) as { data: unknown[][] }).data);
}

const CANCELLED = { reason: 'query cancelled', vendor_code: -900 };
const TIME_LIMIT = { reason: 'statement time limit exceeded', vendor_code: -1122 };
const CLIENT_IDLE = { reason: 'client stopped reading', vendor_code: -900 };
const CONSUMER_GONE = { reason: 'nobody is reading the result any more', vendor_code: -900 };

describe(QueryRunner.name, () => {
  it('runs a statement to its end: head, rows, OK with the row count', async () => {
    const job = jobOf('SELECT g FROM generate_series(1, 250) g', { fetchSize: 100 });
    const { reader, running } = start(job);
    const records = await drain(reader);
    const outcome = await running;
    expect(outcome).toMatchObject({ rows: 250, status: { reason: 'OK', row_count: 250 } });
    expect(records.map((r) => r.kind)).toEqual(['head', 'data', 'data', 'data', 'end']);
    expect(statusOfLast(records)).toEqual(outcome.status);
    await reader.close();
  });

  it('tells when its first rows came back: in its outcome, its end and its progress reports', async () => {
    const job = jobOf('SELECT g FROM (SELECT pg_sleep(0.3)) s, generate_series(1, 250) g', {
      fetchSize: 100,
    });
    const reports: Produced[] = [];
    // Every chunk reports: a throttle of no interval.
    const progress = new ProgressThrottle((made) => reports.push(made), 0);
    const reader = channel.open(job.queryId, { onSilence: () => Promise.resolve(undefined) });
    const { port1, port2 } = new MessageChannel();
    channel.attach(job.queryId, port1);
    const writer = new PortResultWriter(port2, {
      chunks: 4,
      bytes: 1 << 20,
      idleTimeoutMs: 10_000,
    });
    const began = Date.now();
    const running = runner.run(job, writer, { login, progress });
    const records = await drain(reader);
    const outcome = await running;
    const end = records.at(-1);
    if (end?.kind !== 'end') throw new Error(`ends with ${end?.kind}`);
    expect(end.startedAt).toBeGreaterThanOrEqual(began);
    // The statement ran its 0.3 s before any row came: that is running, not streaming.
    expect(outcome.streamingAt).toBeGreaterThanOrEqual(end.startedAt! + 250);
    expect(end.streamingAt).toBe(outcome.streamingAt);
    expect(reports.length).toBeGreaterThan(0);
    expect(reports.every((made) => made.streamingAt === outcome.streamingAt)).toBe(true);
    await reader.close();
  });

  it('reads several chunks of the default fetch_size at once, still a line a chunk', async () => {
    // No fetch_size: the server's (100 here) decides the lines; a read takes as many as fit an
    // entry, so that 250 rows come in two reads (100, then 150) and two entries.
    const job = jobOf('SELECT g FROM generate_series(1, 250) g');
    const { reader, running } = start(job);
    const records = await drain(reader);
    expect((await running).status).toMatchObject({ reason: 'OK', row_count: 250 });
    expect(records.map((r) => r.kind)).toEqual(['head', 'data', 'data', 'end']);
    const lines = Buffer.concat(
      records.map((r) => (r.kind === 'error' ? Buffer.alloc(0) : r.bytes)),
    )
      .toString()
      .split('\n')
      .filter((line) => line.startsWith('{"data"'))
      .map((line) => (JSON.parse(line) as { data: unknown[] }).data.length);
    expect(lines).toEqual([100, 100, 50]);
    await reader.close();
  });

  it('reads one batch of the default fetch_size between two waits of its pace', async () => {
    // An export giving way to interactive work: no larger reads while it waits.
    const job = jobOf('SELECT g FROM generate_series(1, 250) g');
    const { reader, running } = start(job, {}, () => sleep(1).then(() => undefined));
    const records = await drain(reader);
    expect((await running).rows).toBe(250);
    expect(records.map((r) => r.kind)).toEqual(['head', 'data', 'data', 'data', 'end']);
    await reader.close();
  });

  it('tells no streaming time for a statement that failed before any row', async () => {
    const { reader, running } = start(jobOf('SELECT * FROM no_such_table_of_runner_spec'));
    const records = await drain(reader);
    expect((await running).streamingAt).toBeUndefined();
    expect(records.map((r) => r.kind)).toEqual(['error']);
    await reader.close();
  });

  it('waits for its pace before each batch after the first', async () => {
    const job = jobOf('SELECT g FROM generate_series(1, 250) g', { fetchSize: 100 });
    let paced = 0;
    const { reader, running } = start(job, {}, async () => {
      paced += 1;
      await sleep(5);
    });
    await drain(reader);
    expect((await running).rows).toBe(250);
    // Before the second, the third and the (empty) fourth read.
    expect(paced).toBe(3);
    await reader.close();
  });

  it('answers a value whose encoding is too long for a string as too large, not as internal', () => {
    // What JSON's escaping of a value of 0.3 G quotes throws, without the gigabytes.
    let thrown: unknown;
    try {
      'x'.repeat(0x1fffffe8 + 1);
    } catch (err) {
      thrown = err;
    }
    expect(failureStatus(thrown)).toEqual({
      reason: 'a value in the result is too large to be sent: over 536870888 characters',
      sql_state: '54000',
      vendor_code: -112,
    });
  });

  it('answers a connection lost under the statement as the database unavailable (503), not as internal', () => {
    // pg's error when PostgreSQL, or the path to it, goes with a pooled connection: no code. A
    // faults e2e case got 500 when PostgreSQL stopped as a worker took such a connection.
    for (const lost of [
      new Error('Connection terminated unexpectedly'),
      new Error('Connection terminated'),
      Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }),
    ]) {
      expect(failureStatus(lost)).toEqual({
        reason: 'database unavailable: the connection to it was lost',
        sql_state: '08006',
        vendor_code: -206,
      });
    }
    // Stopped on purpose: the stop is what the client is told.
    expect(failureStatus(new Error('Connection terminated unexpectedly'), 'timeout')).toEqual(
      failureStatus(
        Object.assign(new Error('terminated'), { code: '57P01', severity: 'FATAL' }),
        'timeout',
      ),
    );
  });

  describe('with max_rows 0', () => {
    // PostgreSQL reads an Execute of 0 rows as "every row": the whole result in one batch.
    let reads: jest.SpyInstance<Promise<RowBatch>, [number]>;

    beforeEach(() => {
      reads = jest.spyOn(StatementLife.prototype, 'read');
    });

    afterEach(() => {
      reads.mockRestore();
    });

    it('sends no row, says the result was truncated, and never asks PostgreSQL for every row', async () => {
      const job = jobOf('SELECT g FROM generate_series(1, 5) g', { fetchSize: 2, maxRows: 0 });
      const { reader, running } = start(job);
      const records = await drain(reader);
      const outcome = await running;
      expect(outcome).toMatchObject({ rows: 0, status: { row_count: 0, truncated: true } });
      expect(records.filter((r) => r.kind === 'data')).toEqual([]);
      expect(statusOfLast(records)).toEqual(outcome.status);
      expect(reads.mock.calls.map(([n]) => n)).toEqual([1]);
      await reader.close();
    });
  });

  describe('writes one batch while it reads and encodes the next', () => {
    afterEach(() => jest.restoreAllMocks());

    it('with one write in flight at a time, in order', async () => {
      const job = jobOf('SELECT g FROM generate_series(1, 250) g', { fetchSize: 100 });
      let slow: SlowWriter | undefined;
      const encodeRows = Object.getOwnPropertyDescriptor(NdjsonEncoder.prototype, 'rows')!
        .value as NdjsonEncoder['rows'];
      let encoded = 0;
      const readRows = Object.getOwnPropertyDescriptor(StatementLife.prototype, 'read')!
        .value as StatementLife['read'];
      let reads = 0;
      jest.spyOn(StatementLife.prototype, 'read').mockImplementation(function (
        this: StatementLife,
        n,
      ) {
        slow?.log.push(`read ${(reads += 1)}`);
        return readRows.call(this, n);
      });
      jest.spyOn(NdjsonEncoder.prototype, 'rows').mockImplementation(function (
        this: NdjsonEncoder,
        rows,
      ) {
        slow?.log.push(`encode ${(encoded += 1)}`);
        return encodeRows.call(this, rows);
      });
      const { reader, running } = start(job, {}, undefined, (writer) => {
        slow = new SlowWriter(writer, 200);
        return slow;
      });
      const records = await drain(reader);
      expect((await running).status).toMatchObject({ reason: 'OK', row_count: 250 });
      expect(slow!.maxInFlight).toBe(1);
      // PostgreSQL was asked for the second batch before the first was encoded, and the second
      // batch was encoded while the first one's write was still on its way.
      expect(slow!.log.indexOf('read 2')).toBeLessThan(slow!.log.indexOf('encode 1'));
      expect(slow!.log.indexOf('encode 2')).toBeLessThan(slow!.log.indexOf('written 1'));
      expect(slow!.log.filter((entry) => entry.startsWith('written'))).toEqual([
        'written 1',
        'written 2',
        'written 3',
      ]);
      const body = Buffer.concat(
        records.map((r) => (r.kind === 'error' ? Buffer.alloc(0) : r.bytes)),
      ).toString();
      const values = body
        .split('\n')
        .filter((line) => line.startsWith('{"data"'))
        .flatMap((line) => (JSON.parse(line) as { data: number[][] }).data.map(([g]) => g));
      expect(values).toEqual(Array.from({ length: 250 }, (_, i) => i + 1));
      await reader.close();
    });

    it("and gives a chunk's memory to a later chunk only once its write is done", async () => {
      // Chunks of about 100 KB: the encoder takes such a chunk's memory back once it is written.
      const job = jobOf("SELECT g, repeat('x', 1000) AS x FROM generate_series(1, 800) g", {
        fetchSize: 100,
      });
      const memories: ArrayBufferLike[] = [];
      const changed: number[] = [];
      const { reader, running } = start(
        job,
        { chunks: 16, bytes: 16 << 20 },
        undefined,
        (writer) => ({
          endRecorded: false,
          async write(record: ResultRecord) {
            if (record.kind !== 'data') return writer.write(record);
            const n = memories.push(record.bytes.buffer);
            const before = Buffer.from(record.bytes);
            // Long enough for the next chunk to be read and encoded meanwhile.
            await sleep(60);
            if (!before.equals(record.bytes)) changed.push(n);
            await writer.write(record);
          },
          writeFinal: (records: ResultRecord[]) => writer.writeFinal(records),
          watch: (onStop: (reason: StopReason) => void) => writer.watch(onStop),
          interrupt: (reason: StopReason) => writer.interrupt(reason),
        }),
      );
      const records = await drain(reader);
      expect((await running).status).toMatchObject({ reason: 'OK', row_count: 800 });
      expect(changed).toEqual([]);
      expect(memories.length).toBe(8);
      // Two buffers took turns (a third when a chunk outgrew the spare).
      expect(new Set(memories).size).toBeLessThanOrEqual(3);
      const values = rowsIn(records).map(([g, x]) => [g, (x as string).length]);
      expect(values).toEqual(Array.from({ length: 800 }, (_, i) => [i + 1, 1000]));
      await reader.close();
    });

    it('and ends unavailable when the result stream was lost, with what Redis said for the log', async () => {
      const job = jobOf('SELECT g FROM generate_series(1, 1000) g', { fetchSize: 100 });
      const oom = new Error('OOM command not allowed when used memory > maxmemory');
      const { reader, running } = start(
        job,
        {},
        undefined,
        (writer) => new SlowWriter(writer, 5, 2, () => new ResultStreamLostError(oom)),
      );
      const records = await drain(reader);
      const outcome = await running;
      expect(outcome.status).toEqual({
        reason: RESULT_STREAM_LOST,
        sql_state: '57P03',
        vendor_code: -109,
      });
      expect(outcome.cause).toBe(`result stream write failed: ${oom.message}`);
      expect(statusOfLast(records)).toEqual(outcome.status);
      await reader.close();
    });

    it('and ends with the failure of a write that failed, written after it', async () => {
      const job = jobOf('SELECT g FROM generate_series(1, 1000) g', { fetchSize: 100 });
      let slow: SlowWriter | undefined;
      const { reader, running } = start(job, {}, undefined, (writer) => {
        slow = new SlowWriter(writer, 20, 2);
        return slow;
      });
      const backend = await backendOf(job);
      const records = await drain(reader);
      const outcome = await running;
      expect(outcome.status).toMatchObject({ reason: 'internal error', vendor_code: -103 });
      // The client is told nothing more; the log is (JobLifecycle writes it).
      expect(outcome.cause).toMatch(/^Error: the result stream broke\n\s+at /);
      // The first batch, then the end reporting the failure: nothing after the broken write.
      expect(records.map((r) => r.kind)).toEqual(['head', 'data', 'end']);
      expect(statusOfLast(records)).toEqual(outcome.status);
      expect(slow!.log).toEqual(['write 1', 'written 1', 'write 2']);
      await reader.close();
      // Its connection is dropped (a failure not from PostgreSQL may leave it out of step): its
      // backend ends, and nothing of the statement is left.
      let left = 1;
      for (let tries = 0; left > 0 && tries < 100; tries += 1) {
        if (tries > 0) await sleep(20);
        const { rows } = await control.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1`,
          [backend],
        );
        left = rows[0].n;
      }
      expect(left).toBe(0);
    });
  });

  describe("commits a short statement with the portal's close", () => {
    const pgPort = Number(url.port || 5432);
    const table = `runner_spec_${randomUUID().replace(/-/g, '')}`;
    const mood = `${table}_mood`;

    beforeAll(async () => {
      await control.query(`CREATE TABLE ${table} (n int, m text)`);
      await control.query(`CREATE TYPE ${mood} AS ENUM ('ok', 'meh')`);
    });

    afterAll(async () => {
      await control.query(`DROP TABLE ${table}`);
      await control.query(`DROP TYPE ${mood}`);
    });

    /** Socket writes to PostgreSQL while `job` runs (after a first statement warmed the pool). */
    async function writesOf(
      job: ExecuteJobData,
      warmed?: () => void,
    ): Promise<{ writes: number; outcome: ExecutionOutcome; rows: unknown[][] }> {
      const warm = start(jobOf('SELECT 1'));
      await drain(warm.reader);
      await warm.running;
      warmed?.();
      const socket = net.Socket.prototype as unknown as Record<
        '_write' | '_writev',
        (...args: unknown[]) => void
      >;
      let writes = 0;
      const counted = (name: '_write' | '_writev') => {
        const real = socket[name];
        return jest.spyOn(socket, name).mockImplementation(function (this: net.Socket, ...args) {
          if (this.remotePort === pgPort) writes += 1;
          return real.apply(this, args);
        });
      };
      const spies = [counted('_write'), counted('_writev')];
      try {
        const { reader, running } = start(job);
        const records = await drain(reader);
        const outcome = await running;
        await reader.close();
        return { writes, outcome, rows: rowsIn(records) };
      } finally {
        spies.forEach((spy) => spy.mockRestore());
      }
    }

    const rowsOf = async (where: string) =>
      (await control.query<{ n: number }>(`SELECT n FROM ${table} WHERE ${where}`)).rows;

    it('in two writes to PostgreSQL, not three, and it took effect', async () => {
      const { writes, outcome } = await writesOf(
        jobOf(`INSERT INTO ${table} (n) VALUES (1), (2) RETURNING n`),
      );
      expect(outcome.status).toMatchObject({ vendor_code: 0, row_count: 2 });
      expect(writes).toBe(2);
      expect(await rowsOf('n IN (1, 2)')).toHaveLength(2);
    });

    it('but not after a first batch: a result of more than one commits after the close, as before', async () => {
      // First read (prelude, statement, 100 rows), second read, Close + Sync, COMMIT + reset.
      const { writes, outcome } = await writesOf(
        jobOf('SELECT g FROM generate_series(1, 150) g', { fetchSize: 100 }),
      );
      expect(outcome.status).toMatchObject({ vendor_code: 0, row_count: 150 });
      expect(writes).toBe(4);
    });

    it('but not before the type of a column is looked up: a lookup that fails leaves nothing done', async () => {
      const db = databases.get(undefined);
      const { outcome } = await writesOf(
        jobOf(`INSERT INTO ${table} (n, m) VALUES (3, 'ok') RETURNING n, m::${mood}`),
        () => jest.spyOn(db, 'ensureTypes').mockRejectedValueOnce(new Error('catalog unreachable')),
      );
      expect(outcome.status.vendor_code).toBeLessThan(0);
      expect(await rowsOf('n = 3')).toHaveLength(0);
    });

    it('whose COMMIT fails: the failure is reported, the connection taken again', async () => {
      await control.query(
        `CREATE TABLE IF NOT EXISTS ${table}_once (n int UNIQUE DEFERRABLE INITIALLY DEFERRED)`,
      );
      try {
        const job = jobOf(`INSERT INTO ${table}_once VALUES (1), (1) RETURNING n`);
        const { writes, outcome, rows } = await writesOf(job);
        expect(outcome.status).toMatchObject({ sql_state: '23505' });
        // Nothing of the held body goes out: no rows of an INSERT that did not happen.
        expect(rows).toEqual([]);
        // The close with the COMMIT and the reset, which runs after a failed COMMIT too.
        expect(writes).toBe(2);
        const { reader, running } = start(jobOf('SELECT 42'));
        await drain(reader);
        expect((await running).status.vendor_code).toBe(0);
        await reader.close();
        expect((await control.query(`SELECT * FROM ${table}_once`)).rows).toHaveLength(0);
      } finally {
        await control.query(`DROP TABLE ${table}_once`);
      }
    });

    it('leaves nothing a hostile statement set on the session to the next one on the connection', async () => {
      const hostile = jobOf(
        `SELECT pg_backend_pid() AS pid,
                set_config('search_path', 'evil', false),
                set_config('work_mem', '64kB', false),
                pg_try_advisory_lock(4242)`,
      );
      // Its column types known already (looking one up takes a query of its own).
      await writesOf(jobOf(`SELECT 1, 'a'::text, 'b'::text, true`));
      const { writes, rows: hostileRows } = await writesOf(hostile);
      // The short path: its COMMIT and the reset went with the close.
      expect(writes).toBe(2);
      const { rows } = await writesOf(
        jobOf(
          `SELECT pg_backend_pid(), current_setting('search_path'),
                  current_setting('work_mem'),
                  (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())`,
        ),
      );
      const [[pid, searchPath, workMem, locks]] = rows;
      // The same connection, pooled again (not a new one, which would prove nothing).
      expect(pid).toBe(hostileRows[0][0]);
      expect(searchPath).not.toContain('evil');
      expect(workMem).not.toBe('64kB');
      expect(Number(locks)).toBe(0);
    });

    it('keeps the commit of a statement that sets a 1 ms statement_timeout on the session, and leaks it to nobody', async () => {
      // The reset after the COMMIT runs under it: whether it completes (the connection is pooled
      // again, reset) or is cancelled (the connection is dropped), nothing of it reaches the next.
      const { writes, outcome, rows } = await writesOf(
        jobOf(
          `INSERT INTO ${table} (n) SELECT 7 FROM set_config('statement_timeout', '1', false)
             RETURNING pg_backend_pid()`,
        ),
      );
      expect(writes).toBe(2);
      expect(outcome.status.vendor_code).toBe(0);
      expect(await rowsOf('n = 7')).toHaveLength(1);
      const next = await writesOf(
        jobOf(`SELECT pg_backend_pid(), current_setting('statement_timeout')`),
      );
      expect(rows).toHaveLength(1);
      expect(next.rows[0][1]).toBe('0');
    });

    it('answers, and takes a new connection, when its backend is terminated mid-statement', async () => {
      const job = jobOf('SELECT pg_sleep(5)');
      const { reader, running } = start(job);
      const backend = await backendOf(job, 'active');
      await control.query('SELECT pg_terminate_backend($1)', [backend]);
      const records = await drain(reader);
      expect(statusOfLast(records).vendor_code).toBeLessThan(0);
      expect((await running).status.vendor_code).toBeLessThan(0);
      await reader.close();
      expect((await writesOf(jobOf('SELECT 41 + 1'))).rows).toEqual([[42]]);
    });

    it('answers, and takes a new connection, when the backend dies in the COMMIT sent with the close', async () => {
      // A deferred constraint trigger runs at COMMIT: this one ends its own backend there.
      await control.query(`CREATE TABLE ${table}_die (n int)`);
      await control.query(`CREATE FUNCTION ${table}_die() RETURNS trigger LANGUAGE plpgsql AS
        $$BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NULL; END$$`);
      await control.query(`CREATE CONSTRAINT TRIGGER die AFTER INSERT ON ${table}_die
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ${table}_die()`);
      try {
        const { outcome } = await writesOf(
          jobOf(`INSERT INTO ${table}_die VALUES (1) RETURNING n`),
        );
        expect(outcome.status.vendor_code).toBeLessThan(0);
        expect((await control.query(`SELECT * FROM ${table}_die`)).rows).toHaveLength(0);
        expect((await writesOf(jobOf('SELECT 41 + 1'))).rows).toEqual([[42]]);
      } finally {
        await control.query(`DROP TABLE ${table}_die`);
        await control.query(`DROP FUNCTION ${table}_die()`);
      }
    });
  });

  describe('when the session of a pooled connection ended while it sat idle', () => {
    const table = `runner_spec_${randomUUID().replace(/-/g, '')}_ended`;
    let proxy: TcpProxy;

    beforeAll(async () => {
      await control.query(`CREATE TABLE ${table} (n int)`);
      await control.query(`CREATE SEQUENCE ${table}_seq`);
    });

    afterAll(async () => {
      await control.query(`DROP TABLE ${table}`);
      await control.query(`DROP SEQUENCE ${table}_seq`);
    });

    beforeEach(async () => {
      proxy = await proxyToTestDatabase();
      // Statements reach PostgreSQL through the proxy; the control side does not.
      logins = new LoginPools({
        baseUrl: proxy.urlFor(testDatabaseUrl),
        poolSize: 1,
        maxConnections: 2,
        idleTimeoutMs: 10_000,
      });
      runner = new QueryRunner(databases, logins, new LoginRoleProvisioner('unused'), {
        defaultFetchSize: 100,
        maxEntryBytes: 1 << 20,
        credentialKey: CREDENTIAL_KEY,
      });
    });

    afterEach(async () => {
      await proxy.stop();
    });

    /** Runs `job` to its end: its outcome and rows. */
    async function run(job: ExecuteJobData, as: PgLogin) {
      const { reader, running } = start(job, {}, undefined, undefined, as);
      const records = await drain(reader);
      await reader.close();
      return { outcome: await running, rows: rowsIn(records) };
    }

    it.each([
      ['a login pooled as is', login],
      // The suite's login is a superuser: a database user may be one only where allowed.
      [
        'a login checked before each statement',
        { ...login, checkOnUse: true, mayBePrivileged: true },
      ],
    ])(
      'runs the statement once, on a new connection: nothing of it had run (%s)',
      async (_, as) => {
        await run(jobOf('SELECT 1'), as);
        const [ended] = await endSessionsBehind(proxy, control);
        const { outcome, rows } = await run(
          jobOf(`INSERT INTO ${table} VALUES (7) RETURNING n, pg_backend_pid()`),
          as,
        );
        expect(proxy.heldReplies).toBe(1);
        expect(outcome.status).toMatchObject({ reason: 'OK', vendor_code: 0 });
        expect(rows).toHaveLength(1);
        expect(rows[0][0]).toBe(7);
        expect(rows[0][1]).not.toBe(ended);
        const { rows: stored } = await control.query(`DELETE FROM ${table} RETURNING n`);
        expect(stored).toEqual([{ n: 7 }]);
      },
    );

    it('refuses a login checked before each statement that is a superuser, unless it may be privileged', async () => {
      const refused = await run(jobOf('SELECT 1'), { ...login, checkOnUse: true });
      expect(refused.outcome.status).toMatchObject({ sql_state: '42501', vendor_code: -700 });
      expect(refused.outcome.status.reason).toMatch(
        /is now a superuser or reaches the database server's files/,
      );
      expect(refused.rows).toEqual([]);
      const allowed = await run(jobOf('SELECT 1'), {
        ...login,
        checkOnUse: true,
        mayBePrivileged: true,
      });
      expect(allowed.rows).toEqual([[1]]);
    });

    it('never runs again a statement that ended its own session', async () => {
      // A hostile statement: a side effect no rollback undoes, then the end of its own session.
      const { outcome } = await run(
        jobOf(`SELECT nextval('${table}_seq'), pg_terminate_backend(pg_backend_pid())`),
        login,
      );
      expect(outcome.status.vendor_code).toBeLessThan(0);
      const { rows } = await control.query<{ n: string }>(
        `SELECT last_value::text AS n FROM ${table}_seq`,
      );
      expect(rows).toEqual([{ n: '1' }]);
    });
  });

  it("refuses a database user's next statement once its role is a member of one of Sluice's own logins", async () => {
    const tag = randomUUID().replace(/-/g, '').slice(0, 8);
    const [own, user] = [`runner_spec_own_${tag}`, `runner_spec_user_${tag}`];
    await control.query(`CREATE ROLE ${own} NOLOGIN`);
    await control.query(`CREATE ROLE ${user} LOGIN`);
    try {
      runner = new QueryRunner(databases, logins, new LoginRoleProvisioner('unused'), {
        defaultFetchSize: 100,
        maxEntryBytes: 1 << 20,
        credentialKey: CREDENTIAL_KEY,
        ownLogins: [own],
      });
      const as: PgLogin = { user, password: '', checkOnUse: true };
      const run = async () => {
        const { reader, running } = start(
          jobOf('SELECT 1', { role: user }),
          {},
          undefined,
          undefined,
          as,
        );
        await drain(reader);
        await reader.close();
        return running;
      };
      expect((await run()).status).toMatchObject({ reason: 'OK' });
      // As a metadata login granted to it after its login would: its sessions could read every
      // user's hash and sealed password.
      await control.query(`GRANT ${own} TO ${user}`);
      const refused = await run();
      expect(refused.status).toMatchObject({ sql_state: '42501', vendor_code: -700 });
      expect(refused.status.reason).toContain("one of Sluice's own logins");
      logins.forget(as, undefined);
    } finally {
      await sleep(50);
      await control.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1',
        [user],
      );
      await control.query(`DROP ROLE IF EXISTS ${user}`);
      await control.query(`DROP ROLE IF EXISTS ${own}`);
    }
  });

  it('answers 503 DB_UNAVAILABLE when PostgreSQL takes the connection and never answers', async () => {
    const proxy = await proxyToTestDatabase();
    proxy.answerNothing();
    logins = new LoginPools({
      baseUrl: proxy.urlFor(testDatabaseUrl),
      poolSize: 1,
      maxConnections: 2,
      idleTimeoutMs: 10_000,
      connectTimeoutMs: 300,
    });
    runner = new QueryRunner(databases, logins, new LoginRoleProvisioner('unused'), {
      defaultFetchSize: 100,
      maxEntryBytes: 1 << 20,
      credentialKey: CREDENTIAL_KEY,
    });
    const started = Date.now();
    // No statement time limit: only the connect's own ends the wait.
    const { reader, running } = start(jobOf('SELECT 1', { timeoutMs: undefined }));
    const records = await drain(reader);
    await reader.close();
    expect(Date.now() - started).toBeLessThan(3_000);
    const outcome = await running;
    expect(outcome.status).toMatchObject({ sql_state: '08006', vendor_code: -206 });
    expect(httpStatusOf(outcome.status)).toBe(503);
    expect(statusOfLast(records)).toEqual(outcome.status);
    await proxy.stop();
  }, 5_000);

  it('does not run a statement whose reader cancelled before it started', async () => {
    const job = jobOf(LONG_SLEEP);
    const reader = channel.open(job.queryId, { onSilence: () => Promise.resolve(undefined) });
    await reader.cancel();
    const { port1, port2 } = new MessageChannel();
    channel.attach(job.queryId, port1);
    const writer = new PortResultWriter(port2, {
      chunks: 4,
      bytes: 1 << 20,
      idleTimeoutMs: 10_000,
    });
    await sleep(50); // the cancel crosses the port
    const startedAt = Date.now();
    const outcome = await runner.run(job, writer, { login });
    expect(Date.now() - startedAt).toBeLessThan(1_000);
    expect(outcome).toMatchObject({ rows: 0, status: CANCELLED });
    expect(await drain(reader)).toEqual([
      { kind: 'error', status: outcome.status, startedAt: expect.any(Number) },
    ]);
    await reader.close();
  });

  describe('stops a statement running in PostgreSQL', () => {
    it('when the reader cancels', async () => {
      const job = jobOf(LONG_SLEEP);
      const { reader, running } = start(job);
      const backend = await backendOf(job, 'active');
      const stoppedAt = Date.now();
      await reader.cancel();
      const outcome = await running;
      expect(Date.now() - stoppedAt).toBeLessThan(2_000);
      expect(outcome.status).toMatchObject(CANCELLED);
      // Nothing was sent yet: the reader gets the error record, not a cut body.
      expect(await drain(reader)).toEqual([
        { kind: 'error', status: outcome.status, startedAt: expect.any(Number) },
      ]);
      await reader.close();
      await expectCleanAfter(job, backend);
    });

    it('at its time limit', async () => {
      const job = jobOf(LONG_SLEEP, { timeoutMs: 300 });
      // Before start(): the limit's clock starts inside it.
      const startedAt = Date.now();
      const { reader, running } = start(job);
      const backend = await backendOf(job, 'active');
      const outcome = await running;
      const took = Date.now() - startedAt;
      expect(took).toBeGreaterThanOrEqual(300);
      expect(took).toBeLessThan(2_000);
      expect(outcome.status).toMatchObject(TIME_LIMIT);
      expect(statusOfLast(await drain(reader))).toEqual(outcome.status);
      await reader.close();
      await expectCleanAfter(job, backend);
    });

    it('when its reader is gone', async () => {
      const job = jobOf(LONG_SLEEP);
      const { reader, running } = start(job);
      const backend = await backendOf(job, 'active');
      const stoppedAt = Date.now();
      await reader.close();
      const outcome = await running;
      expect(Date.now() - stoppedAt).toBeLessThan(2_000);
      expect(outcome.status).toMatchObject(CONSUMER_GONE);
      await expectCleanAfter(job, backend);
    });
  });

  describe('stops a statement whose client does not read', () => {
    /** Starts MANY_ROWS and waits until the runner waits for the client to read. */
    async function blocked(job: ExecuteJobData, window: Partial<FlowWindow> = {}) {
      const started = start(job, { chunks: 2, ...window });
      await sleep(300);
      return { ...started, backend: await backendOf(job) };
    }

    it('when the reader cancels', async () => {
      const job = jobOf(MANY_ROWS, { fetchSize: 100 });
      const { reader, running, backend } = await blocked(job);
      const stoppedAt = Date.now();
      await reader.cancel();
      const outcome = await running;
      expect(Date.now() - stoppedAt).toBeLessThan(2_000);
      expect(outcome.status).toMatchObject(CANCELLED);
      // Rows were sent before the stop; the runner stopped at the window.
      expect(outcome.rows).toBeLessThan(1_000);
      const records = await drain(reader);
      expect(records[0].kind).toBe('head');
      expect(statusOfLast(records)).toEqual(outcome.status);
      await reader.close();
      await expectCleanAfter(job, backend);
    });

    it('at its time limit', async () => {
      const job = jobOf(MANY_ROWS, { fetchSize: 100, timeoutMs: 500 });
      const { reader, running, backend } = await blocked(job);
      const outcome = await running;
      expect(outcome.status).toMatchObject(TIME_LIMIT);
      expect(outcome.rows).toBeLessThan(1_000);
      expect(statusOfLast(await drain(reader))).toEqual(outcome.status);
      await reader.close();
      await expectCleanAfter(job, backend);
    });

    it('when the client stays idle for the idle timeout', async () => {
      const job = jobOf(MANY_ROWS, { fetchSize: 100 });
      const startedAt = Date.now();
      const { reader, running, backend } = await blocked(job, { idleTimeoutMs: 600 });
      const outcome = await running;
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(600);
      expect(outcome.status).toMatchObject(CLIENT_IDLE);
      expect(statusOfLast(await drain(reader))).toEqual(outcome.status);
      await reader.close();
      await expectCleanAfter(job, backend);
    });

    it('when its reader is gone', async () => {
      const job = jobOf(MANY_ROWS, { fetchSize: 100 });
      const { reader, running, backend } = await blocked(job);
      const stoppedAt = Date.now();
      await reader.close();
      const outcome = await running;
      expect(Date.now() - stoppedAt).toBeLessThan(2_000);
      expect(outcome.status).toMatchObject(CONSUMER_GONE);
      await expectCleanAfter(job, backend);
    });
  });
});
