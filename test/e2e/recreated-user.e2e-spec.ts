import { randomBytes } from 'node:crypto';
import { backendsOf, closeDb, db, e2eEnv, eventually } from './support/client';
import { randomName } from './support/service';
import {
  TestUser,
  adminCall,
  call,
  cli,
  createRole,
  createUser,
  dropRole,
  freshLogin,
} from './support/users';

/**
 * A user deleted and re-created under the same name is someone else: nothing of the deleted
 * one's — queries, kept results, Idempotency-Keys, queries still running — reaches the new one.
 * Kept results last SLUICE_RESULT_TTL_SECONDS (8 s in the suite): each case reads well within it.
 */
const schema = randomName('e2e_reuse');
const SECRET = 'the-old-users-secret';
const SECRETS = `select secret from ${schema}.secrets`;
const roles: string[] = [];
const users: string[] = [];

beforeAll(async () => {
  await db().query(`CREATE SCHEMA ${schema}`);
  await db().query(`CREATE TABLE ${schema}.secrets (secret text)`);
  // Rows enough that the kept result's bytes stand out in the ledger's total.
  await db().query(
    `INSERT INTO ${schema}.secrets SELECT '${SECRET}-' || g FROM generate_series(1, 2000) g`,
  );
});

afterAll(async () => {
  await db().query('DELETE FROM sluice.users WHERE username = ANY($1)', [users]);
  await db().query(`DROP SCHEMA ${schema} CASCADE`);
  for (const name of roles) await dropRole(name);
  await closeDb();
});

async function role(): Promise<string> {
  const name = await createRole();
  roles.push(name);
  return name;
}

/** A role of its own that may read the secrets. */
async function reader(): Promise<string> {
  const name = await role();
  await db().query(`GRANT USAGE ON SCHEMA ${schema} TO ${name}`);
  await db().query(`GRANT SELECT ON ${schema}.secrets TO ${name}`);
  return name;
}

async function tokenOf(username: string, password: string): Promise<string> {
  const res = await freshLogin(username, password);
  expect(res.status).toBe(200);
  return res.json.access_token as string;
}

/** Creates a user of the name, of a role of its own, through the api; answers its token. */
async function recreate(username: string): Promise<string> {
  const password = randomBytes(12).toString('base64url');
  const created = await adminCall('POST', '/v1/users', { username, password, role: await role() });
  expect(created.status).toBe(201);
  return tokenOf(username, password);
}

/** A GET as a Bearer token, on the api the admin calls go to (it hears of changes first). */
function get(token: string, path: string) {
  return call(e2eEnv().baseUrl, 'GET', path, undefined, { authorization: `Bearer ${token}` });
}

/** A POST /v1/execute as a Bearer token, with an Idempotency-Key if given. */
function post(token: string, body: Record<string, unknown>, key?: string) {
  return call(e2eEnv().baseUrl, 'POST', '/v1/execute', body, {
    authorization: `Bearer ${token}`,
    ...(key ? { 'idempotency-key': key } : {}),
  });
}

/** Kept bytes as /metrics tells them (the ledger's total). */
async function keptBytes(): Promise<number> {
  const metrics = await fetch(`${e2eEnv().baseUrl}/metrics`).then((res) => res.text());
  return Number(/^sluice_kept_result_bytes\{[^}]*\} (\d+)/m.exec(metrics)?.[1]);
}

/** Submits a statement whose result is kept; answers its query id. */
async function submitKept(token: string, statement: string, key?: string): Promise<string> {
  const res = await post(token, { statement, wait_timeout: 0 }, key);
  expect(res.status).toBe(202);
  return res.json.query_id as string;
}

/** Reads the secrets into a kept result; answers the query and its bytes once it succeeded. */
async function keptSecrets(
  token: string,
  key?: string,
): Promise<{ queryId: string; bytes: number }> {
  const queryId = await submitKept(token, SECRETS, key);
  const info = await eventually(async () => {
    const res = await get(token, `/v1/queries/${queryId}`);
    return res.json.state === 'succeeded' ? (res.json as { bytes_produced: number }) : undefined;
  });
  return { queryId, bytes: info.bytes_produced };
}

/** A kept statement running in PostgreSQL; answers its query id once its backend is there. */
async function sleeping(token: string): Promise<string> {
  const queryId = await submitKept(token, 'select pg_sleep(60) as slept');
  await eventually(async () => ((await backendsOf(queryId)) > 0 ? true : undefined));
  return queryId;
}

/** The query and its result are not the token's: 404 for both, nothing of the secret. */
async function expectNotTheirs(token: string, queryId: string): Promise<void> {
  const result = await get(token, `/v1/queries/${queryId}/result`);
  expect(result.status).toBe(404);
  expect(result.text).not.toContain(SECRET);
  expect((await get(token, `/v1/queries/${queryId}`)).status).toBe(404);
}

const newKey = () => `reuse-${randomBytes(6).toString('hex')}`;

describe('a user deleted and re-created under the same name', () => {
  let old: TestUser;

  beforeAll(async () => {
    old = await createUser({ role: await reader(), prefix: 'e2e_reuse' });
    users.push(old.username);
  });

  it("gets none of the old user's results, queries or keys, and the old queries stop", async () => {
    const oldToken = await tokenOf(old.username, old.password);
    const key = newKey();
    const secret = await keptSecrets(oldToken, key);
    // Still running when its user goes: it must stop, and its result must be nobody's.
    const sleeper = await sleeping(oldToken);
    const keptBefore = await keptBytes();

    expect((await adminCall('DELETE', `/v1/users/${old.username}`)).status).toBe(200);
    const newToken = await recreate(old.username);

    for (const queryId of [secret.queryId, sleeper]) await expectNotTheirs(newToken, queryId);
    const listed = await get(newToken, '/v1/queries');
    expect(listed.status).toBe(200);
    expect(listed.json).toEqual([]);
    // The old user's running query is stopped in PostgreSQL, and the kept bytes given back.
    await eventually(async () => ((await backendsOf(sleeper)) === 0 ? true : undefined));
    expect(await keptBytes()).toBeLessThanOrEqual(keptBefore - secret.bytes);

    // The old key replays nothing: a new query runs, as the new user's role, which may not read.
    const repeat = await post(newToken, { statement: SECRETS }, key);
    expect(repeat.status).toBe(403);
    expect(repeat.text).not.toContain(SECRET);
    expect(repeat.json.status.sql_state).toBe('42501');
    expect(repeat.json.query_id).not.toBe(secret.queryId);
  }, 30_000);

  it('owns nothing of one deleted with no api told, whose data was not purged', async () => {
    const first = await createUser({ role: await reader(), prefix: 'e2e_reuse' });
    users.push(first.username);
    const key = newKey();
    const secret = await keptSecrets(await tokenOf(first.username, first.password), key);

    // Only the row goes, and no api hears of it (`sluice users remove` sends a NOTIFY).
    await db().query('DELETE FROM sluice.users WHERE username = $1', [first.username]);
    const newToken = await recreate(first.username);

    await expectNotTheirs(newToken, secret.queryId);
    expect((await get(newToken, '/v1/queries')).json).toEqual([]);
    // The old key still stands for the old query, which is not this user's: refused, not replayed.
    const repeat = await post(newToken, { statement: SECRETS, wait_timeout: 0 }, key);
    expect(repeat.status).toBe(410);
    expect(repeat.text).not.toContain(SECRET);
  }, 30_000);
});

describe('a user whose role changes', () => {
  it('keeps no result, and runs no query, of the old role', async () => {
    const user = await createUser({ role: await reader(), prefix: 'e2e_rerole' });
    users.push(user.username);
    const token = await tokenOf(user.username, user.password);
    const secret = await keptSecrets(token);
    const sleeper = await sleeping(token);

    const changed = await adminCall('PATCH', `/v1/users/${user.username}`, {
      role: await role(),
    });
    expect(changed.status).toBe(200);

    // The same session goes on, as the new role: what the old one made is gone.
    const result = await get(token, `/v1/queries/${secret.queryId}/result`);
    expect(result.status).toBe(410);
    expect(result.text).not.toContain(SECRET);
    await eventually(async () => ((await backendsOf(sleeper)) === 0 ? true : undefined));
    const info = await eventually(async () => {
      const res = await get(token, `/v1/queries/${sleeper}`);
      return res.json.state === 'cancelled' ? (res.json as Record<string, unknown>) : undefined;
    });
    expect(info.status).toMatchObject({ sql_state: '57014' });
    // Its queries stay listed: the record of what they did is theirs.
    const listed = await get(token, '/v1/queries');
    expect((listed.json as { query_id: string }[]).map((q) => q.query_id).sort()).toEqual(
      [secret.queryId, sleeper].sort(),
    );
  }, 30_000);
});

/**
 * `sluice users remove` and `sluice users set --role` change only the users table, and send a
 * NOTIFY: the apis that hear it end what the change makes no longer the user's, as a change made
 * through the api does.
 */
describe('a user changed with the sluice command', () => {
  /** A user of a reader role with a kept result of the secrets and a statement running. */
  async function busyUser(prefix: string) {
    const user = await createUser({ role: await reader(), prefix });
    users.push(user.username);
    const token = await tokenOf(user.username, user.password);
    const secret = await keptSecrets(token);
    return { username: user.username, token, secret, sleeper: await sleeping(token) };
  }

  /** Its backend gone, the query as the admin sees it is cancelled. */
  async function expectStopped(queryId: string): Promise<void> {
    await eventually(async () => ((await backendsOf(queryId)) === 0 ? true : undefined));
    expect(await endedAsAdminSees(queryId)).toMatchObject({
      state: 'cancelled',
      status: { sql_state: '57014' },
    });
  }

  /** The query as the admin sees it, once it has ended. */
  async function endedAsAdminSees(queryId: string): Promise<Record<string, unknown>> {
    return eventually(async () => {
      const info = (await adminCall('GET', `/v1/queries/${queryId}`)).json as Record<
        string,
        unknown
      >;
      return info.state === 'running' || info.state === 'queued' ? undefined : info;
    });
  }

  it('removed: their running query stops, is forgotten, and their kept result is dropped', async () => {
    const { username, secret, sleeper } = await busyUser('e2e_clirm');
    const keptBefore = await keptBytes();

    expect((await cli(['users', 'remove', username])).code).toBe(0);

    // Stopped in PostgreSQL, and forgotten as a delete through the api forgets it.
    await eventually(async () => ((await backendsOf(sleeper)) === 0 ? true : undefined));
    await eventually(async () =>
      (await adminCall('GET', `/v1/queries/${sleeper}`)).status === 404 ? true : undefined,
    );
    await eventually(async () =>
      (await keptBytes()) <= keptBefore - secret.bytes ? true : undefined,
    );
  }, 30_000);

  it('removed: forgotten as a delete through the api forgets them, keys and all', async () => {
    const user = await createUser({ role: await reader(), prefix: 'e2e_clifgt' });
    users.push(user.username);
    const key = newKey();
    const secret = await keptSecrets(await tokenOf(user.username, user.password), key);
    const keptBefore = await keptBytes();

    expect((await cli(['users', 'remove', user.username])).code).toBe(0);
    // An api drops their kept result after it has forgotten them.
    await eventually(async () =>
      (await keptBytes()) <= keptBefore - secret.bytes ? true : undefined,
    );
    const newToken = await recreate(user.username);

    // The old key stands for nothing now (unforgotten, it is refused with 410): a new query runs,
    // as the new user's role, which may not read.
    const repeat = await post(newToken, { statement: SECRETS }, key);
    expect(repeat.status).toBe(403);
    expect(repeat.text).not.toContain(SECRET);
    expect(repeat.json.query_id).not.toBe(secret.queryId);
  }, 30_000);

  it('unchanged, whatever notice anyone sends: nothing of theirs ends', async () => {
    const { username, token, secret, sleeper } = await busyUser('e2e_clinot');
    // What the command sends, sent by anyone who can reach the metadata database.
    const notice = JSON.stringify({ kind: 'user', username });
    await db().query('SELECT pg_notify($1, $2)', ['sluice_events', notice]);
    // Every api hears it within milliseconds; a wrong end would come as fast.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await backendsOf(sleeper)).toBe(1);
    const result = await get(token, `/v1/queries/${secret.queryId}/result`);
    expect(result.status).toBe(200);
    expect(result.text).toContain(SECRET);
    expect(
      (
        await call(e2eEnv().baseUrl, 'DELETE', `/v1/queries/${sleeper}`, undefined, {
          authorization: `Bearer ${token}`,
        })
      ).status,
    ).toBe(200);
  }, 30_000);

  it('given another role: their query of the old role stops, their result of it is gone', async () => {
    const { username, token, secret, sleeper } = await busyUser('e2e_cliset');

    expect((await cli(['users', 'set', username, '--role', await role()])).code).toBe(0);

    await expectStopped(sleeper);
    const result = await eventually(async () => {
      const res = await get(token, `/v1/queries/${secret.queryId}/result`);
      return res.status === 410 ? res : undefined;
    });
    expect(result.text).not.toContain(SECRET);
    // A query of the new role runs on.
    const fresh = await post(token, { statement: 'select 1 as n' });
    expect(fresh.status).toBe(200);
  }, 30_000);
});
