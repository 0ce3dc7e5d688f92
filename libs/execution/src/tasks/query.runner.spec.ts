import { Client } from 'pg';
import { randomUUID } from 'node:crypto';
import { MessageChannel } from 'node:worker_threads';
import { ExecuteJobData, ResultRecord, Status } from '@app/contracts';
import { LoginRoleProvisioner, PgLogin } from '@app/access';
import { FlowWindow, InProcessResultChannel, PortResultWriter, ResultReader } from '@app/transport';
import { connectTestDatabase, testDatabaseUrl } from '@test/settings';
import { DatabaseRegistry } from './database.registry';
import { LoginPools } from './login.pools';
import { ExecutionOutcome, Pace, QueryRunner, applicationNameOf } from './query.runner';

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

/** Starts `job` with a reader on the other side of the channel, as the worker pool does. */
function start(
  job: ExecuteJobData,
  window: Partial<FlowWindow> = {},
  pace?: Pace,
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
  return { reader, running: runner.run(job, writer, login, pace) };
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
      [applicationNameOf(job.queryId), state ?? null],
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
    [applicationNameOf(job.queryId)],
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
    const outcome = await runner.run(job, writer, login);
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
      const { reader, running } = start(job);
      const startedAt = Date.now();
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
