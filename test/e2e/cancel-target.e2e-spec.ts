import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { DatabaseHandle } from '../../libs/execution/src/tasks/database.registry';
import { type Backend, backendOf } from '../../libs/execution/src/tasks/backend.signal';
import { closeDb, db, e2eEnv } from './support/client';
import { randomName } from './support/service';

/**
 * A stop names its statement's backend by what the statement cannot change: a cancel by pid and
 * the secret key only its client was given (PostgreSQL's own cancel request), an end of the
 * session by pid and login. A cancel with another key is ignored; the backend it names is
 * cancelled, or its session ended, whatever the statement set. Driven over the suite's own
 * PostgreSQL and control login, with the same code the worker runs.
 */
const role = randomName('e2e_cancel');
const password = randomBytes(12).toString('base64url');
let handle: DatabaseHandle;
let other: Client;

beforeAll(async () => {
  await db().query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
  handle = new DatabaseHandle(e2eEnv().serviceEnv.DATABASE_URL);
});

beforeEach(async () => {
  const url = new URL(e2eEnv().serviceEnv.DATABASE_URL);
  url.username = role;
  url.password = password;
  other = new Client({ connectionString: url.toString() });
  other.on('error', () => undefined); // a terminated session: its query is told
  await other.connect();
});

afterEach(async () => {
  await other.end().catch(() => undefined);
});

afterAll(async () => {
  await handle.close();
  await db().query(`DROP ROLE ${role}`);
  await closeDb();
});

const pidOf = (client: Client) => (client as unknown as { processID: number }).processID;

const backend = (client: Client): Backend =>
  backendOf(client as unknown as Parameters<typeof backendOf>[0])!;

/**
 * Starts `sql` on the other connection and resolves once PostgreSQL shows it running (in
 * pg_sleep, when `sleeping`: a cancel that comes before a DO block enters its handler is not
 * caught), with a promise of its outcome and time.
 */
async function running(sql: string, sleeping = false) {
  const started = Date.now();
  const outcome = other.query(sql).then(
    () => ({ code: 'ok', ms: Date.now() - started }),
    (err: { code?: string }) => ({ code: err.code, ms: Date.now() - started }),
  );
  // A signal that reaches a backend still reading its command is dropped by PostgreSQL: wait
  // until it shows the statement running (on a loaded machine that can take a while).
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { rows } = await db().query<{ running: boolean }>(
      `SELECT state = 'active' AND ($2 OR wait_event = 'PgSleep') AS running
         FROM pg_stat_activity WHERE pid = $1`,
      [pidOf(other), !sleeping],
    );
    if (rows[0]?.running) break;
    if (Date.now() > deadline) throw new Error('the statement never showed as running');
    await new Promise((r) => setTimeout(r, 10));
  }
  return { outcome };
}

/** A statement that renames itself, then sleeps: what a hostile user sends to dodge a cancel. */
const RENAMED = `SELECT pg_sleep(10) FROM (SELECT set_config('application_name', 'x', true)) s`;

describe(DatabaseHandle.name, () => {
  it('cancels nothing with another secret key, nor ends the session of another login', async () => {
    const b = await running('SELECT pg_sleep(2)');
    const named = backend(other);
    await handle.cancel({ ...named, secretKey: named.secretKey ^ 1 });
    expect(await handle.terminate({ ...named, user: 'someone_else' })).toBe(false);
    expect(await b.outcome).toMatchObject({ code: 'ok' });
  });

  it('cancels the statement of the backend it names, whatever the statement called itself', async () => {
    const b = await running(RENAMED);
    await handle.cancel(backend(other));
    const outcome = await b.outcome;
    expect(outcome.code).toBe('57014');
    expect(outcome.ms).toBeLessThan(5_000);
  });

  it('ends the session of a statement that catches its cancel', async () => {
    const b = await running(
      `DO $$ BEGIN FOR i IN 1..10 LOOP
         BEGIN PERFORM pg_sleep(1); EXCEPTION WHEN query_canceled THEN NULL; END;
       END LOOP; END $$`,
      true,
    );
    await handle.cancel(backend(other));
    await new Promise((r) => setTimeout(r, 300));
    expect(await handle.terminate(backend(other))).toBe(true);
    const outcome = await b.outcome;
    expect(outcome.code).toBe('57P01');
    expect(outcome.ms).toBeLessThan(5_000);
  });
});
