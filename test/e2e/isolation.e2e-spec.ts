import {
  HttpResult,
  applicationNameOf,
  backendsOf,
  closeDb,
  db,
  e2eEnv,
  eventually,
  execute,
} from './support/client';
import { randomName } from './support/service';
import {
  TestUser,
  call,
  createRole,
  createUser,
  dropRole,
  executeAs,
  expectEnvelope,
  freshLogin,
  loginRoleOf,
} from './support/users';

const schema = randomName('e2e_iso');
const roles: string[] = [];
const users: string[] = [];
let analyst: TestUser;
let reader: TestUser;
let writer: TestUser;
let analystToken: string;
let readerToken: string;
let writerToken: string;

async function tokenOf(u: TestUser): Promise<string> {
  const res = await freshLogin(u.username, u.password);
  expect(res.status).toBe(200);
  return res.json.access_token as string;
}

/** The login role Sluice provisioned for `role` (the control login, a member too, is not it). */
async function loginOf(role: string): Promise<string> {
  const { rows } = await db().query<{ login: string }>(
    `SELECT l.rolname AS login FROM pg_roles l
       JOIN pg_auth_members m ON m.member = l.oid
       JOIN pg_roles r ON r.oid = m.roleid
      WHERE r.rolname = $1 AND l.rolcanlogin AND l.rolname = $2`,
    [role, loginRoleOf(role)],
  );
  expect(rows).toHaveLength(1);
  return rows[0].login;
}

async function rowsIn(table: string): Promise<number> {
  const { rows } = await db().query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${schema}.${table}`,
  );
  return rows[0].n;
}

beforeAll(async () => {
  // analyst: reads `open`, not `secret`. editor: may also insert into `open`.
  const analystRole = await createRole('e2e_analyst');
  const editorRole = await createRole('e2e_editor');
  roles.push(analystRole, editorRole);
  await db().query(`CREATE SCHEMA ${schema}`);
  await db().query(`CREATE TABLE ${schema}.open (a int)`);
  await db().query(`CREATE TABLE ${schema}.secret (a int)`);
  await db().query(
    `INSERT INTO ${schema}.open VALUES (1); INSERT INTO ${schema}.secret VALUES (42)`,
  );
  await db().query(`GRANT USAGE ON SCHEMA ${schema} TO ${analystRole}, ${editorRole}`);
  await db().query(`GRANT SELECT ON ${schema}.open TO ${analystRole}, ${editorRole}`);
  await db().query(`GRANT INSERT ON ${schema}.open TO ${editorRole}`);
  analyst = await createUser({ role: analystRole });
  reader = await createUser({ role: editorRole, read_only: true });
  writer = await createUser({ role: editorRole });
  users.push(analyst.username, reader.username, writer.username);
  [analystToken, readerToken, writerToken] = [
    await tokenOf(analyst),
    await tokenOf(reader),
    await tokenOf(writer),
  ];
});

afterAll(async () => {
  await db().query('DELETE FROM sluice.users WHERE username = ANY($1)', [users]);
  await db().query(`DROP SCHEMA ${schema} CASCADE`);
  for (const role of roles) await dropRole(role);
  await closeDb();
});

describe('privileges of the role', () => {
  it('runs statements as the role of the user', async () => {
    const res = await executeAs(analystToken, { statement: 'select current_user' });
    expect(res.json.data).toEqual([[analyst.role]]);
  });

  it('answers 403 with SQLSTATE 42501 for a table the role may not read', async () => {
    const res = await executeAs(analystToken, { statement: `select * from ${schema}.secret` });
    expect(res.status).toBe(403);
    expectEnvelope(res, '42501', -700);
    expect(res.json.query_id).toBeDefined();
    expect(
      (await executeAs(analystToken, { statement: `select a from ${schema}.open` })).json.data,
    ).toEqual([[1]]);
  });
});

describe('read-only users', () => {
  it('may read but not change data: 403 with SQLSTATE 25006', async () => {
    const before = await rowsIn('open');
    expect(
      (await executeAs(readerToken, { statement: `select a from ${schema}.open` })).status,
    ).toBe(200);
    const res = await executeAs(readerToken, {
      statement: `insert into ${schema}.open values (2)`,
    });
    expect(res.status).toBe(403);
    expectEnvelope(res, '25006', -701);
    // The same role without the flag may insert: the flag is what stops it.
    expect(
      (await executeAs(writerToken, { statement: `insert into ${schema}.open values (3)` })).status,
    ).toBe(200);
    expect(await rowsIn('open')).toBe(before + 1);
  });

  it.each([
    `with x as (select set_config('transaction_read_only', 'off', true)) insert into %s.open select 9 from x`,
    `select set_config('transaction_read_only', 'off', true)`,
    `do $$ begin set transaction read write; insert into %s.open values (9); end $$`,
    `do $$ begin perform set_config('default_transaction_read_only', 'off', false); end $$`,
    'set session characteristics as transaction read write',
    'set transaction read write',
  ])('cannot leave read-only mode with %s, in it or after it', async (template) => {
    const before = await rowsIn('open');
    const res = await executeAs(readerToken, { statement: template.replaceAll('%s', schema) });
    expect(res.status).toBeLessThan(500);
    expect(res.status === 200 || res.status >= 400).toBe(true);
    const next = await executeAs(readerToken, {
      statement: `insert into ${schema}.open values (8)`,
    });
    expect(next.status).toBe(403);
    expectEnvelope(next, '25006', -701);
    expect(await rowsIn('open')).toBe(before);
  });

  it("cannot create, change or delete its role's large objects (PostgreSQL 15 lets read-only transactions)", async () => {
    const owner = await executeAs(writerToken, {
      statement: `select lo_from_bytea(0, 'kept'::bytea)::text`,
    });
    expect(owner.status).toBe(200);
    const oid = Number(owner.json.data[0][0]);
    const objects = async () =>
      (
        await db().query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_largeobject_metadata WHERE lomowner = $1::regrole`,
          [writer.role],
        )
      ).rows[0].n;
    const before = await objects();
    for (const statement of [
      `select lo_put(${oid}, 0, 'gone'::bytea)`,
      `select lo_unlink(${oid})`,
      `select lo_from_bytea(0, 'new'::bytea)`,
      `select lo_create(0)`,
    ]) {
      const res = await executeAs(readerToken, { statement });
      expect(res.status).toBeLessThan(500);
    }
    const { rows } = await db().query<{ data: Buffer }>('SELECT lo_get($1::oid) AS data', [oid]);
    expect(rows[0].data.toString()).toBe('kept');
    expect(await objects()).toBe(before);
    await db().query('SELECT lo_unlink($1::oid)', [oid]);
  });
});

const ROLE_CHANGES = [
  'SET ROLE postgres',
  'set role none',
  'SET LOCAL ROLE %admin',
  'SET SESSION ROLE %admin',
  "set role = '%admin'",
  'SET "role" TO %admin',
  'RESET ROLE',
  '  -- first a comment\n  /* and another */ reset   role',
  'SET SESSION AUTHORIZATION DEFAULT',
  'set local session authorization %admin',
  'SET session_authorization = %admin',
  'RESET SESSION AUTHORIZATION',
  '; SET ROLE %admin',
];

describe('statements that change their role', () => {
  it.each(ROLE_CHANGES)('refuses %j with 403 before queueing it', async (template) => {
    const statement = template.replaceAll('%admin', e2eEnv().adminRole);
    const res = await executeAs(analystToken, { statement });
    expect(res.status).toBe(403);
    expectEnvelope(res, '42501', -702);
    // No query id: refused before one existed, let alone a job.
    expect(res.json.query_id).toBeUndefined();
  });

  it('refuses them in text/plain bodies and in GET requests too', async () => {
    const res = await fetch(`${e2eEnv().baseUrl}/v1/execute`, {
      method: 'POST',
      headers: { authorization: `Bearer ${analystToken}`, 'content-type': 'text/plain' },
      body: 'reset role',
    });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { status: { vendor_code: number } }).status.vendor_code).toBe(
      -702,
    );
    const get = await fetch(
      `${e2eEnv().baseUrl}/v1/execute?statement=${encodeURIComponent('SET ROLE postgres')}`,
      { headers: { authorization: `Bearer ${analystToken}` } },
    );
    expect(get.status).toBe(403);
  });

  it('cannot smuggle one in after another statement', async () => {
    const res = await executeAs(analystToken, {
      statement: 'select 1; reset role; select current_user',
    });
    expect(res.status).toBe(400);
    expectEnvelope(res, '42601', -501);
    expect(res.json.status.reason).toMatch(/^one statement per request/);
  });

  it('refuses them for administrators as well', async () => {
    const res = await execute({ statement: 'reset role' });
    expect(res.status).toBe(403);
    expectEnvelope(res, '42501', -702);
  });
});

describe("set_config('role', …) inside a statement", () => {
  it('has no effect beyond the statement, on the same pooled connection', async () => {
    const escape = await executeAs(analystToken, {
      statement:
        "select pg_backend_pid() as pid, set_config('role', 'none', false) as r, set_config('sluice.e2e_probe', 'leaked', false) as p",
    });
    expect(escape.status).toBe(200);
    const pid = escape.json.data[0][0] as number;
    let sameConnection = 0;
    for (let i = 0; i < 60 && sameConnection < 3; i++) {
      const next: HttpResult = await executeAs(analystToken, {
        statement:
          "select pg_backend_pid(), current_user, current_setting('role'), current_setting('sluice.e2e_probe', true)",
      });
      expect(next.status).toBe(200);
      const [backend, user, roleSetting, probe] = next.json.data[0] as [
        number,
        string,
        string,
        string | null,
      ];
      // Every statement, on whatever connection, runs as the user's own role ...
      expect(user).toBe(analyst.role);
      expect(roleSetting).toBe(analyst.role);
      if (backend === pid) {
        sameConnection++;
        // ... and the session state the escape left behind was discarded with it.
        expect(probe === null || probe === '').toBe(true);
      }
    }
    expect(sameConnection).toBeGreaterThan(0);
  });

  it('reaches no more than the role itself with role none, in both modes', async () => {
    const res = await executeAs(analystToken, {
      statement: `select set_config('role', 'none', true) as r, current_user as u, query_to_xml('select a from ${schema}.secret', false, false, '') as x`,
    });
    // The login role has the rights of the user's role and no others.
    expect(res.status).toBe(403);
    expectEnvelope(res, '42501', -700);
    const next = await executeAs(analystToken, { statement: `select * from ${schema}.secret` });
    expect(next.status).toBe(403);
  });

  it('leaves other users of the pool with their own roles', async () => {
    for (let i = 0; i < 5; i++) {
      await executeAs(analystToken, { statement: "select set_config('role', 'none', false)" });
      const admin = await execute({ statement: 'select current_user' });
      expect(admin.json.data).toEqual([[e2eEnv().adminRole]]);
      const writerSees = await executeAs(writerToken, { statement: 'select current_user' });
      expect(writerSees.json.data).toEqual([[writer.role]]);
    }
  });
});

describe('settings stored on the login role (ALTER ROLE session_user SET …)', () => {
  /** The login role the editor role's statements run on, and its sessions' backends. */
  afterEach(async () => {
    await db().query(`ALTER ROLE ${await loginOf(writer.role)} RESET ALL`);
  });

  it("reach no other user's statements, on new connections either", async () => {
    // The writer leaves its role (RESET ROLE) and stores settings on its own login role, which
    // every new connection of the login, shared by the reader, would start with.
    const store = await executeAs(writerToken, {
      statement: `do $$ begin reset role;
        execute format('alter role %I set statement_timeout = 1', session_user);
        execute format('alter role %I set bytea_output = escape', session_user);
        execute format('alter role %I in database %I set extra_float_digits = -10',
          session_user, current_database());
        end $$`,
    });
    expect(store.status).toBe(200);
    // Every connection of the login is new from here on.
    const login = await loginOf(writer.role);
    await db().query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1', [
      login,
    ]);
    for (let i = 0; i < 3; i++) {
      const res = await executeAs(readerToken, {
        statement: `select count(*)::int, '\\x01'::bytea, pi(), current_setting('statement_timeout')
                      from generate_series(1, 2000000)`,
      });
      expect(res.status).toBe(200);
      expect(res.json.data).toEqual([[2000000, '\\x01', 3.141592653589793, '0']]);
    }
    const { rows } = await db().query(
      `SELECT 1 FROM pg_db_role_setting s JOIN pg_roles l ON l.oid = s.setrole
        WHERE l.rolname = $1`,
      [login],
    );
    expect(rows).toEqual([]);
  });
});

describe("other users' queries in pg_stat_activity", () => {
  it('show no query id: a statement runs under a keyed hash of its id, and its owner still cancels it by id', async () => {
    const pending = executeAs(analystToken, { statement: 'select pg_sleep(30)' });
    const id = await eventually(async () => {
      const list = await call(e2eEnv().baseUrl, 'GET', '/v1/queries', undefined, {
        authorization: `Bearer ${analystToken}`,
      });
      return (list.json as { query_id: string; state: string }[]).find((q) => q.state === 'running')
        ?.query_id;
    });
    const analystLogin = await loginOf(analyst.role);
    await eventually(async () => {
      const { rows } = await db().query(
        `select 1 from pg_stat_activity where usename = $1 and query like 'select pg_sleep%'`,
        [analystLogin],
      );
      return rows.length === 1 ? true : undefined;
    });
    // Another role's user: pg_stat_activity shows every session's user and application_name.
    const seen = await executeAs(writerToken, {
      statement: 'select usename::text, application_name from pg_stat_activity',
    });
    expect(seen.status).toBe(200);
    const sessions = seen.json.data as [string | null, string][];
    expect(sessions.filter(([, name]) => name.includes(id))).toEqual([]);
    const analysts = sessions.filter(([usename]) => usename === analystLogin).map(([, n]) => n);
    const uuid = /[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}/i;
    expect(analysts.filter((name) => uuid.test(name))).toEqual([]);
    expect(analysts).toContain(applicationNameOf(id));
    const cancelled = await call(e2eEnv().baseUrl, 'DELETE', `/v1/queries/${id}`, undefined, {
      authorization: `Bearer ${analystToken}`,
    });
    expect(cancelled.status).toBe(200);
    expect((await pending).status).toBe(409);
    await eventually(async () => ((await backendsOf(id)) === 0 ? true : undefined));
  });
});
