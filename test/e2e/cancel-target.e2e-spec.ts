import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { DatabaseHandle } from '../../libs/execution/src/tasks/database.registry';
import { applicationNameOf } from '../../libs/execution/src/tasks/query.runner';
import { closeDb, db, e2eEnv } from './support/client';
import { randomName } from './support/service';

/**
 * A cancel names its statement: the worker's control login signals a backend only while it
 * still shows that query's application_name. A pooled connection that has moved on to another
 * user's statement — the race a bare pg_cancel_backend(pid) loses — is left alone. Driven over
 * the suite's own PostgreSQL and control login, with the same code the worker runs.
 */
const role = randomName('e2e_cancel');
const password = randomBytes(12).toString('base64url');
let handle: DatabaseHandle;
let other: Client;

beforeAll(async () => {
  await db().query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
  handle = new DatabaseHandle(e2eEnv().serviceEnv.DATABASE_URL);
  const url = new URL(e2eEnv().serviceEnv.DATABASE_URL);
  url.username = role;
  url.password = password;
  other = new Client({ connectionString: url.toString() });
  await other.connect();
});

afterAll(async () => {
  await other.end();
  await handle.close();
  await db().query(`DROP ROLE ${role}`);
  await closeDb();
});

const pidOf = (client: Client) => (client as unknown as { processID: number }).processID;

/**
 * Starts `select pg_sleep(s)` as another query on the same connection and resolves once
 * PostgreSQL shows it running, with a promise of its outcome and time.
 */
async function sleepAs(queryId: string, seconds: number) {
  await other.query(`SET application_name = '${applicationNameOf(queryId)}'`);
  const started = Date.now();
  const outcome = other.query(`SELECT pg_sleep(${seconds})`).then(
    () => ({ code: 'ok', ms: Date.now() - started }),
    (err: { code?: string }) => ({ code: err.code, ms: Date.now() - started }),
  );
  // A signal that reaches a backend still reading its command is dropped by PostgreSQL: wait
  // until it shows the sleep running (on a loaded machine that can take a while).
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { rows } = await db().query<{ running: boolean }>(
      `SELECT state = 'active' AND query LIKE 'SELECT pg_sleep%' AS running
         FROM pg_stat_activity WHERE pid = $1`,
      [pidOf(other)],
    );
    if (rows[0]?.running) break;
    if (Date.now() > deadline) throw new Error('the sleep never showed as running');
    await new Promise((r) => setTimeout(r, 10));
  }
  return { outcome };
}

describe(DatabaseHandle.name, () => {
  it("leaves alone the next user's statement on a connection its query has left", async () => {
    const pid = pidOf(other);
    // Query A ran on this connection and ended; B, another user's, runs there now.
    const b = await sleepAs('query-b', 2);
    const sent = await handle.cancelStatement(pid, applicationNameOf('query-a'));
    expect(sent).toBe(false);
    expect(await b.outcome).toMatchObject({ code: 'ok' });
  });

  it('cancels the statement of the query it names', async () => {
    const pid = pidOf(other);
    const b = await sleepAs('query-b', 10);
    const sent = await handle.cancelStatement(pid, applicationNameOf('query-b'));
    expect(sent).toBe(true);
    const outcome = await b.outcome;
    expect(outcome.code).toBe('57014');
    expect(outcome.ms).toBeLessThan(5_000);
  });
});
