import { HttpResult, closeDb, db, e2eEnv, eventually, request } from './support/client';
import { randomName } from './support/service';
import { proxyToTestDatabase } from '../support/tcp.proxy';
import {
  TestUser,
  adminCall,
  basic,
  cli,
  call,
  createRole,
  createUser,
  dropRole,
  executeAs,
  expectEnvelope,
  freshLogin,
} from './support/users';

const schema = randomName('e2e_users');
const roles: string[] = [];
const users: string[] = [];

async function role(): Promise<string> {
  const name = await createRole();
  roles.push(name);
  return name;
}

async function user(options: Parameters<typeof createUser>[0] = {}): Promise<TestUser> {
  const made = await createUser({ role: options.role ?? (await role()), ...options });
  users.push(made.username);
  return made;
}

async function tokenOf(u: TestUser): Promise<string> {
  const res = await freshLogin(u.username, u.password);
  expect(res.status).toBe(200);
  return res.json.access_token as string;
}

/** POST /v1/users of a user of `role`, named `username` (and dropped after the spec). */
function postUser(role: string, username = randomName('e2e_user')): Promise<HttpResult> {
  users.push(username);
  return adminCall('POST', '/v1/users', { username, password: 'a-good-password', role });
}

beforeAll(async () => {
  await db().query(`CREATE SCHEMA ${schema}`);
  await db().query(`CREATE TABLE ${schema}.t (a int)`);
  await db().query(`INSERT INTO ${schema}.t VALUES (1), (2)`);
});

afterAll(async () => {
  await db().query('DELETE FROM sluice.users WHERE username = ANY($1)', [users]);
  await db().query(`DROP SCHEMA ${schema} CASCADE`);
  for (const name of roles) await dropRole(name);
  await closeDb();
});

describe('user management over HTTP', () => {
  it('creates a user that logs in and runs statements as its role', async () => {
    const r = await role();
    const username = randomName('e2e_user');
    const res = await postUser(r, username);
    expect(res.status).toBe(201);
    expect(res.json).toEqual({
      username,
      role: r,
      admin: false,
      read_only: false,
      enabled: true,
      created_at: expect.any(String),
      updated_at: expect.any(String),
      status: { reason: 'OK', sql_state: '00000', vendor_code: 0 },
    });
    const token = await tokenOf({ username, password: 'a-good-password', role: r });
    const who = await executeAs(token, { statement: 'select current_user as u' });
    expect(who.status).toBe(200);
    expect(who.json.data).toEqual([[r]]);
  });

  it('lists and shows users, never with a password or its hash', async () => {
    const u = await user();
    const list = await adminCall('GET', '/v1/users');
    expect(list.status).toBe(200);
    expect(list.json.users).toEqual(
      expect.arrayContaining([expect.objectContaining({ username: u.username, role: u.role })]),
    );
    const one = await adminCall('GET', `/v1/users/${u.username}`);
    expect(one.status).toBe(200);
    expect(one.json.username).toBe(u.username);
    for (const text of [list.text, one.text]) {
      expect(text).not.toMatch(/password|scrypt\$/);
      expect(text).not.toContain(u.password);
    }
  });

  it('lets only administrators manage users: 401 without credentials, 403 for others', async () => {
    const u = await user();
    const token = await tokenOf(u);
    const attempts: [string, string, unknown][] = [
      ['GET', '/v1/users', undefined],
      ['GET', `/v1/users/${u.username}`, undefined],
      ['POST', '/v1/users', { username: 'x_nope', password: 'password1', role: u.role }],
      ['PATCH', `/v1/users/${u.username}`, { admin: true }],
      ['DELETE', `/v1/users/${u.username}`, undefined],
    ];
    for (const [method, path, body] of attempts) {
      const anonymous = await request(body, { method, path });
      expect(anonymous.status).toBe(401);
      expect(anonymous.headers.get('www-authenticate')).toMatch(/Bearer/);
      expectEnvelope(anonymous, '28000', -300);
      const denied = await request(body, { method, path, token });
      expect(denied.status).toBe(403);
      expectEnvelope(denied, '42501', -700);
      const viaBasic = await call(
        e2eEnv().baseUrl,
        method,
        path,
        body,
        basic(u.username, u.password),
      );
      expect(viaBasic.status).toBe(403);
    }
    expect((await adminCall('GET', `/v1/users/${u.username}`)).json.admin).toBe(false);
  });

  it('takes a Basic password with colons in it whole (RFC 7617: the name ends at the first colon)', async () => {
    const u = await user();
    const password = `a:b:${u.password}`;
    expect((await adminCall('PATCH', `/v1/users/${u.username}`, { password })).status).toBe(200);
    const statement = { statement: 'select current_user as who' };
    const base = e2eEnv().baseUrl;
    const whole = await call(base, 'POST', '/v1/execute', statement, basic(u.username, password));
    expect(whole.status).toBe(200);
    // Only the part before the second colon: a wrong password, not a partial match.
    const cut = await call(base, 'POST', '/v1/execute', statement, basic(u.username, 'a:b'));
    expectEnvelope(cut, '28P01', -304);
  });

  it('makes a user an administrator with PATCH, effective within moments on every api', async () => {
    const u = await user();
    const token = await tokenOf(u);
    expect((await request(undefined, { method: 'GET', path: '/v1/users', token })).status).toBe(
      403,
    );
    expect((await adminCall('PATCH', `/v1/users/${u.username}`, { admin: true })).json.admin).toBe(
      true,
    );
    // On every api: the others hear of it by PostgreSQL's NOTIFY, sent when the change commits.
    for (const base of e2eEnv().baseUrls) {
      const listed = await eventually(async () => {
        const res = await call(base, 'GET', '/v1/users', undefined, {
          authorization: `Bearer ${token}`,
        });
        return res.status === 200 ? res : undefined;
      }, 2_000);
      expect(listed.status).toBe(200);
    }
  });

  it('refuses a role that does not exist with 400 and vendor code -310', async () => {
    const res = await postUser(randomName('no_such_role'));
    expect(res.status).toBe(400);
    expectEnvelope(res, '42704', -310);
    expect(res.json.status.reason).toMatch(/does not exist/);
    const u = await user();
    const patch = await adminCall('PATCH', `/v1/users/${u.username}`, { role: 'no_such_role_x' });
    expect(patch.status).toBe(400);
    expectEnvelope(patch, '42704', -310);
  });

  it("refuses the control login's role, and a role that is a member of it, with 400 and vendor code -310", async () => {
    // A user of either would run statements with the control login's rights over every role.
    const { controlRole } = e2eEnv();
    const member = randomName('e2e_control_member');
    await db().query(`CREATE ROLE ${member} NOLOGIN`);
    roles.push(member);
    await db().query(`GRANT ${controlRole} TO ${member}`);
    for (const role of [controlRole, member]) {
      const username = randomName('e2e_user');
      const res = await postUser(role, username);
      expect(res.status).toBe(400);
      expectEnvelope(res, '42704', -310);
      expect(res.json.status.reason).toMatch(/DATABASE_URL/);
    }
    const u = await user();
    const patch = await adminCall('PATCH', `/v1/users/${u.username}`, { role: member });
    expect(patch.status).toBe(400);
    expectEnvelope(patch, '42704', -310);
    expect((await executeAs(await tokenOf(u), { statement: 'select 1' })).status).toBe(200);
  });

  it('warns of a role that can log in, and refuses a superuser role with 400 and vendor code -310', async () => {
    const loginable = await role();
    await db().query(`ALTER ROLE ${loginable} LOGIN`);
    const res = await postUser(loginable);
    expect(res.status).toBe(201);
    expect(res.json.warnings).toEqual([expect.stringMatching(/can log in: its users can set/)]);
    const u = await user();
    const patch = await adminCall('PATCH', `/v1/users/${u.username}`, { role: loginable });
    expect(patch.status).toBe(200);
    expect(patch.json.warnings).toHaveLength(1);
    const plain = await adminCall('PATCH', `/v1/users/${u.username}`, { read_only: true });
    expect(plain.json.warnings).toBeUndefined();

    const su = randomName('e2e_superuser');
    await db().query(`CREATE ROLE ${su} SUPERUSER NOLOGIN`);
    roles.push(su);
    const refused = await postUser(su);
    expect(refused.status).toBe(400);
    expectEnvelope(refused, '42704', -310);
    expect(refused.json.status.reason).toMatch(/is a superuser/);
  });

  it("refuses PostgreSQL's predefined roles with 400 and -310: an administrator may not give a user the server's programs and files", async () => {
    // On PostgreSQL 15 CREATEROLE may grant them: a user of pg_execute_server_program ran
    // COPY … TO PROGRAM as the server's OS user.
    for (const role of ['pg_execute_server_program', 'pg_write_server_files', 'pg_read_all_data']) {
      const res = await postUser(role);
      expect(res.status).toBe(400);
      expectEnvelope(res, '42704', -310);
      expect(res.json.status.reason).toMatch(/predefined/);
    }
    const u = await user();
    const patch = await adminCall('PATCH', `/v1/users/${u.username}`, {
      role: 'pg_execute_server_program',
    });
    expect(patch.status).toBe(400);
    expectEnvelope(patch, '42704', -310);
    // No login role of Sluice's was made a member of one.
    const { rows } = await db().query(
      `SELECT u.rolname FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid
         JOIN pg_roles u ON u.oid = m.member
        WHERE r.rolname IN ('pg_execute_server_program', 'pg_write_server_files', 'pg_read_all_data')
          AND u.rolname ~ '^sluice_[0-9a-f]{10}_'`,
    );
    expect(rows).toEqual([]);
  });

  it('refuses a role the authenticator may not become, unless the authenticator is a superuser', async () => {
    const r = randomName('e2e_ungranted');
    await db().query(`CREATE ROLE ${r} NOLOGIN`);
    roles.push(r);
    const res = await postUser(r);
    if (e2eEnv().mode === 'standalone') {
      // A NOINHERIT authenticator that was not granted the role could never SET ROLE to it.
      expect(res.status).toBe(400);
      expectEnvelope(res, '42704', -310);
      expect(res.json.status.reason).toMatch(/may not create or grant/);
    } else {
      // The cluster suite logs in as a superuser, which may become any role.
      expect(res.status).toBe(201);
    }
  });

  it('refuses a second user of the same name with 409 and vendor code -311', async () => {
    const u = await user();
    const res = await adminCall('POST', '/v1/users', {
      username: u.username,
      password: 'another-password',
      role: u.role,
    });
    expect(res.status).toBe(409);
    expectEnvelope(res, '42710', -311);
  });

  it.each([
    [{ username: 'bad name', password: 'a-good-password', role: 'r' }, /username/],
    [{ username: 'al@ice', password: 'a-good-password', role: 'r' }, /username/],
    [{ username: 'alice', password: 'short', role: 'r' }, /password/],
    [{ username: 'alice', password: 'p'.repeat(1025), role: 'r' }, /password/],
    [{ username: 'u'.repeat(129), password: 'a-good-password', role: 'r' }, /username/],
    [{ username: 'alice', password: 'a-good-password' }, /role/],
    [{ username: 'alice', password: 'a-good-password', role: 'r\u0000x' }, /role/],
    [{ username: 'alice', password: 'a-good-password', role: 'r', admin: 'yes' }, /admin/],
    [{ username: 'alice', password: 'a-good-password', role: 'r', enabled: null }, /enabled/],
    [{ username: 'alice', password: 'a-good-password', role: 'r', superuser: true }, /superuser/],
    [{ username: 42, password: 'a-good-password', role: 'r' }, /username/],
  ])('refuses an invalid new user %j with 400', async (body, field) => {
    const res = await adminCall('POST', '/v1/users', body);
    expect(res.status).toBe(400);
    expectEnvelope(res, '08P01', -100);
    expect(res.json.status.reason).toMatch(field);
  });

  it('changes the password: the old one and every token issued before stop working', async () => {
    const u = await user();
    const token = await tokenOf(u);
    const res = await adminCall('PATCH', `/v1/users/${u.username}`, {
      password: 'the-new-password',
    });
    expect(res.status).toBe(200);
    expect((await freshLogin(u.username, u.password)).status).toBe(401);
    const old = await executeAs(token, { statement: 'select 1' });
    expect(old.status).toBe(401);
    expect(old.headers.get('www-authenticate')).toMatch(/invalid_token/);
    expectEnvelope(old, '28000', -301);
    const fresh = await tokenOf({ ...u, password: 'the-new-password' });
    expect((await executeAs(fresh, { statement: 'select 1' })).status).toBe(200);
  });

  it('changes the role: the next statement runs as the new one, on every api within moments', async () => {
    const u = await user();
    const token = await tokenOf(u);
    const next = await role();
    const statement = { statement: 'select current_user' };
    // Every api has the user cached with its old role.
    for (const base of e2eEnv().baseUrls) {
      expect((await executeAs(token, statement, base)).json.data).not.toEqual([[next]]);
    }
    expect((await adminCall('PATCH', `/v1/users/${u.username}`, { role: next })).status).toBe(200);
    expect((await executeAs(token, statement)).json.data).toEqual([[next]]);
    // The others hear of it by PostgreSQL's NOTIFY, sent when the change commits.
    for (const base of e2eEnv().baseUrls) {
      const who = await eventually(async () => {
        const res = await executeAs(token, statement, base);
        return JSON.stringify(res.json.data) === JSON.stringify([[next]]) ? res : undefined;
      }, 2_000);
      expect(who.json.data).toEqual([[next]]);
    }
  });

  it('disables a user: no login, no token, no Basic, until enabled again', async () => {
    const u = await user();
    const token = await tokenOf(u);
    expect(
      (await adminCall('PATCH', `/v1/users/${u.username}`, { enabled: false })).json.enabled,
    ).toBe(false);
    const login = await freshLogin(u.username, u.password);
    expect(login.status).toBe(401);
    expectEnvelope(login, '28P01', -304);
    const byToken = await executeAs(token, { statement: 'select 1' });
    expect(byToken.status).toBe(401);
    expect(byToken.headers.get('www-authenticate')).toMatch(/Bearer/);
    expectEnvelope(byToken, '28000', -301);
    const byBasic = await call(
      e2eEnv().baseUrl,
      'POST',
      '/v1/execute',
      { statement: 'select 1' },
      basic(u.username, u.password),
    );
    expect(byBasic.status).toBe(401);
    await adminCall('PATCH', `/v1/users/${u.username}`, { enabled: true });
    expect((await executeAs(token, { statement: 'select 1' })).status).toBe(200);
  });

  it('does not let an administrator lock themselves out', async () => {
    const me = e2eEnv().adminUser;
    for (const change of [{ enabled: false }, { admin: false }]) {
      const res = await adminCall('PATCH', `/v1/users/${me}`, change);
      expect(res.status).toBe(400);
      expectEnvelope(res, '08P01', -100);
    }
    expect((await adminCall('DELETE', `/v1/users/${me}`)).status).toBe(400);
    expect((await adminCall('PATCH', `/v1/users/${me}`, {})).status).toBe(400);
  });

  it('deletes a user: its tokens stop working, and a new user of that name does not inherit them', async () => {
    const u = await user();
    const token = await tokenOf(u);
    const res = await adminCall('DELETE', `/v1/users/${u.username}`);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ status: { reason: 'deleted', sql_state: '00000', vendor_code: 0 } });
    expect((await executeAs(token, { statement: 'select 1' })).status).toBe(401);
    const again = await adminCall('POST', '/v1/users', { ...u });
    expect(again.status).toBe(201);
    expect((await executeAs(token, { statement: 'select 1' })).status).toBe(401);
  });

  it('answers 404 for a user that does not exist', async () => {
    for (const [method, body] of [
      ['GET', undefined],
      ['PATCH', { read_only: true }],
      ['DELETE', undefined],
    ] as const) {
      const res = await adminCall(method, '/v1/users/no_such_user_here', body);
      expect(res.status).toBe(404);
      expectEnvelope(res, '42704', -104);
    }
    expect((await adminCall('GET', '/v1/users/bad%20name')).status).toBe(404);
  });
});

describe('databases a role may connect to', () => {
  const database = randomName('e2e_noconn');
  let allowed: TestUser;
  let denied: TestUser;

  beforeAll(async () => {
    await db().query(`CREATE DATABASE ${database}`);
    await db().query(`REVOKE CONNECT ON DATABASE ${database} FROM PUBLIC`);
    allowed = await user();
    denied = await user();
    await db().query(
      `GRANT CONNECT ON DATABASE ${database} TO ${allowed.role}, ${e2eEnv().controlRole}`,
    );
  });

  afterAll(async () => {
    await db().query(`DROP DATABASE ${database} WITH (FORCE)`);
  });

  it('refuses a login to a database the role may not connect to with 403', async () => {
    const byField = await freshLogin(denied.username, denied.password, { database });
    expect(byField.status).toBe(403);
    expectEnvelope(byField, '42501', -700);
    expect(byField.json.status.reason).toMatch(/may not connect/);
    const byName = await freshLogin(`${denied.username}@${database}`, denied.password);
    expect(byName.status).toBe(403);
    const ok = await freshLogin(`${allowed.username}@${database}`, allowed.password);
    expect(ok.status).toBe(200);
    expect(ok.json.database).toBe(database);
  });

  it('refuses to queue a statement for a database the role may not connect to', async () => {
    const token = await tokenOf(denied);
    for (const res of [
      await executeAs(token, { statement: 'select 1', database }),
      await executeAs(token, { statement: 'select 1' }, undefined, `/v1/execute/${database}`),
      await call(
        e2eEnv().baseUrl,
        'POST',
        '/v1/execute',
        { statement: 'select 1' },
        basic(`${denied.username}@${database}`, denied.password),
      ),
    ]) {
      expect(res.status).toBe(403);
      expectEnvelope(res, '42501', -700);
      // Refused before a query existed.
      expect(res.json.query_id).toBeUndefined();
    }
    const allowedToken = await tokenOf(allowed);
    const res = await executeAs(allowedToken, {
      statement: 'select current_database()',
      database,
    });
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([[database]]);
  });

  it('answers 403 once CONNECT is revoked from the role, pooled connections or not', async () => {
    const token = await tokenOf(allowed);
    expect((await executeAs(token, { statement: 'select 1', database })).status).toBe(200);
    await db().query(`REVOKE CONNECT ON DATABASE ${database} FROM ${allowed.role}`);
    // PostgreSQL checks CONNECT when a session starts: end the pooled ones made before.
    await db().query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [database],
    );
    try {
      // The api's own check caches a few seconds; the login role is refused by PostgreSQL.
      const res = await executeAs(token, { statement: 'select 1', database });
      expect(res.status).toBe(403);
      expectEnvelope(res, '42501', -700);
    } finally {
      await db().query(`GRANT CONNECT ON DATABASE ${database} TO ${allowed.role}`);
    }
  });

  it('answers 400 for a login to a database that does not exist', async () => {
    const res = await freshLogin(allowed.username, allowed.password, {
      database: 'no_such_database_x',
    });
    expect(res.status).toBe(400);
    expectEnvelope(res, '3D000', -205);
  });
});

describe('sluice users (CLI)', () => {
  it('gives up within SLUICE_PG_CONNECT_TIMEOUT_MS on a metadata database that never answers', async () => {
    const proxy = await proxyToTestDatabase();
    proxy.answerNothing();
    try {
      // What the command takes to start and answer on this machine now (npx, Node, the code).
      let started = Date.now();
      expect(await cli(['users', 'list'], '')).toMatchObject({ code: 0 });
      const answering = Date.now() - started;
      started = Date.now();
      const listed = await cli(['users', 'list'], '', {
        SLUICE_METADATA_DATABASE_URL: proxy.urlFor(
          e2eEnv().serviceEnv.SLUICE_METADATA_DATABASE_URL,
        ),
        SLUICE_PG_CONNECT_TIMEOUT_MS: '300',
      });
      expect(listed).toMatchObject({ code: 1, stderr: expect.stringMatching(/timeout expired/) });
      // Far less than the 10 s default past what the command takes anyway, however busy the
      // machine (a run beside other test runs took 8.6 s in all).
      expect(Date.now() - started - answering).toBeLessThan(5_000);
    } finally {
      await proxy.stop();
    }
  });

  it('adds, lists, changes and removes a user, with passwords from stdin only', async () => {
    const r = await role();
    const username = randomName('e2e_cli');
    users.push(username);
    const password = 'cli-password-' + randomName('p');

    const added = await cli(
      ['users', 'add', username, '--role', r, '--read-only'],
      `${password}\n`,
    );
    expect(added).toMatchObject({ code: 0, stdout: `added user ${username} (role ${r})\n` });
    const listed = await cli(['users', 'list', '--json']);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ username, role: r, read_only: true, enabled: true }),
      ]),
    );
    expect(listed.stdout + listed.stderr).not.toContain(password);
    const table = await cli(['users', 'list']);
    expect(table.stdout).toMatch(new RegExp(`^${username}\\s+${r}\\s+no\\s+yes\\s+yes$`, 'm'));

    const login = await freshLogin(username, password);
    expect(login.status).toBe(200);
    const token = login.json.access_token as string;

    // The running api hears of the change within moments (PostgreSQL's NOTIFY, sent when the
    // CLI's change commits): no stale cache lets the user in for longer.
    const refusedWithin = (attempt: () => Promise<HttpResult>) =>
      eventually(async () => {
        const res = await attempt();
        return res.status === 401 ? res : undefined;
      }, 2_000);
    expect((await cli(['users', 'set', username, '--disable'])).code).toBe(0);
    expect((await refusedWithin(() => freshLogin(username, password))).status).toBe(401);
    expect((await executeAs(token, { statement: 'select 1' })).status).toBe(401);

    const changed = await cli(
      ['users', 'set', username, '--enable', '--password'],
      'new-password-1\n',
    );
    expect(changed.code).toBe(0);
    // Each try before the api heard is a failed login: a few, far apart, stay under the lockout.
    let fresh = await freshLogin(username, 'new-password-1');
    for (let tries = 1; fresh.status !== 200 && tries < 3; tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      fresh = await freshLogin(username, 'new-password-1');
    }
    expect(fresh.status).toBe(200);
    expect((await freshLogin(username, password)).status).toBe(401);

    expect(await cli(['users', 'remove', username])).toMatchObject({
      code: 0,
      stdout: `removed user ${username}\n`,
    });
    expect((await adminCall('GET', `/v1/users/${username}`)).status).toBe(404);
  });

  it('refuses a password on the command line without echoing it', async () => {
    const res = await cli(['users', 'add', 'e2e_never', '--role', 'x', '--password=Sup3rSecret!']);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/never from the command line/);
    expect(res.stdout + res.stderr).not.toContain('Sup3rSecret!');
    const set = await cli(['users', 'set', 'e2e_never', '--password=Sup3rSecret!']);
    expect(set.code).toBe(2);
    expect(set.stdout + set.stderr).not.toContain('Sup3rSecret!');
  });

  it('fails with a clear message for an unknown role, a short password or an unknown user', async () => {
    const r = await role();
    const unknownRole = await cli(
      ['users', 'add', randomName('e2e_cli'), '--role', 'no_such_role_x'],
      'long-enough-pw\n',
    );
    expect(unknownRole.code).toBe(1);
    expect(unknownRole.stderr).toMatch(/role "no_such_role_x" does not exist/);
    const short = await cli(['users', 'add', randomName('e2e_cli'), '--role', r], 'short\n');
    expect(short.code).toBe(1);
    expect(short.stderr).toMatch(/password must be longer than or equal to 8/);
    const missing = await cli(['users', 'remove', 'no_such_user_here']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/no user named "no_such_user_here"/);
  });
});
