import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { HttpResult, closeDb, db, e2eEnv, eventually, execute } from './support/client';
import { randomName } from './support/service';
import {
  TestUser,
  adminCall,
  createRole,
  createUser,
  dropRole,
  executeAs,
  freshLogin,
} from './support/users';

/**
 * A hostile user whose role may read one table tries to act as another Sluice user's role (or
 * the admin's, or the control login's) with every way SQL has to change its role inside one
 * statement. Each statement runs over a login role that is a member of the attacker's role and
 * of nothing else, so none of them may reach the secret: not in data, not in the reason.
 */
const schema = randomName('e2e_escape');
const own = randomName('e2e_attacker_own');
const SECRET = `topsecret_${randomBytes(6).toString('hex')}`;
const roles: string[] = [];
const users: string[] = [];
let attacker: TestUser;
let victim: TestUser;
let attackerToken: string;
let victimToken: string;

async function tokenOf(u: TestUser): Promise<string> {
  const res = await freshLogin(u.username, u.password);
  expect(res.status).toBe(200);
  return res.json.access_token as string;
}

beforeAll(async () => {
  const attackerRole = await createRole('e2e_attacker');
  const victimRole = await createRole('e2e_victim');
  roles.push(attackerRole, victimRole);
  await db().query(`CREATE SCHEMA ${schema}`);
  await db().query(`CREATE TABLE ${schema}.open (a int)`);
  await db().query(`CREATE TABLE ${schema}.secret (x text)`);
  await db().query(`INSERT INTO ${schema}.open VALUES (1)`);
  await db().query(`INSERT INTO ${schema}.secret VALUES ($1)`, [SECRET]);
  await db().query(`GRANT USAGE ON SCHEMA ${schema} TO ${attackerRole}, ${victimRole}`);
  await db().query(`GRANT SELECT ON ${schema}.open TO ${attackerRole}`);
  await db().query(`GRANT SELECT ON ${schema}.secret TO ${victimRole}`);
  // The attacker may create functions, in a schema of its own.
  await db().query(`CREATE SCHEMA ${own} AUTHORIZATION ${attackerRole}`);
  attacker = await createUser({ role: attackerRole, prefix: 'e2e_attacker' });
  victim = await createUser({ role: victimRole, prefix: 'e2e_victim' });
  users.push(attacker.username, victim.username);
  [attackerToken, victimToken] = [await tokenOf(attacker), await tokenOf(victim)];
  // The victim really can read it: the attacks below fail for want of the role, not of the row.
  const seen = await executeAs(victimToken, { statement: `select x from ${schema}.secret` });
  expect(seen.json.data).toEqual([[SECRET]]);
});

afterAll(async () => {
  await db().query('DELETE FROM sluice.users WHERE username = ANY($1)', [users]);
  await db().query(`DROP SCHEMA ${schema} CASCADE`);
  await db().query(`DROP SCHEMA ${own} CASCADE`);
  for (const role of roles) await dropRole(role);
  await closeDb();
});

/** Every role the attacker may try to become. */
function targets(): [string, string][] {
  const env = e2eEnv();
  return [
    ['another user', victim.role],
    ['the admin', env.adminRole],
    ['the control login', env.controlRole],
    ['no role (the login role itself)', 'none'],
  ];
}

const quote = (s: string) => s.replace(/'/g, "''");

/** The attacks, for one target role `%r`; `%s` is the schema, `%o` the attacker's own. */
const ATTACKS: [string, string][] = [
  [
    'set_config in the select list, then query_to_xml',
    "select set_config('role', '%r', true), query_to_xml('select * from %s.secret', true, true, '')",
  ],
  [
    'EXECUTE set role in a DO block, the value raised back',
    "do $$ declare v text; begin execute 'set role %r'; select x into v from %s.secret; raise exception '%', v; end $$",
  ],
  [
    'SET ROLE as a PL/pgSQL statement',
    "do $$ declare v text; begin set role %r; select x into v from %s.secret; raise exception 'got %', v; end $$",
  ],
  [
    'RESET ROLE in a DO block',
    "do $$ declare v text; begin reset role; select x into v from %s.secret; raise exception 'got %', v; end $$",
  ],
  [
    'SET SESSION AUTHORIZATION in EXECUTE',
    "do $$ declare v text; begin execute 'set session authorization %r'; select x into v from %s.secret; raise exception 'got %', v; end $$",
  ],
  [
    "set_config('session_authorization')",
    "select set_config('session_authorization', '%r', true), query_to_xml('select * from %s.secret', true, true, '')",
  ],
  [
    'set_config in a CTE',
    "with r as materialized (select set_config('role', '%r', true) as r) select r.r, query_to_xml('select * from %s.secret', true, true, '') from r",
  ],
  [
    'table_to_xml after set_config',
    "select set_config('role', '%r', true), table_to_xml('%s.secret', true, true, '')",
  ],
  [
    'cursor_to_xml after SET ROLE',
    "do $$ declare c refcursor := 'c'; v xml; begin execute 'set role %r'; open c for select * from %s.secret; v := cursor_to_xml(c, 10, true, true, ''); raise exception 'got %', v; end $$",
  ],
  [
    'a function the attacker creates',
    "do $$ begin execute $f$create or replace function %o.become() returns text language sql as $b$ select set_config('role', '%r', true) $b$$f$; end $$",
  ],
  [
    'calling it before reading',
    "select %o.become(), query_to_xml('select * from %s.secret', true, true, '')",
  ],
  [
    'a plpgsql function that reads as the other role',
    "do $$ begin execute $f$create or replace function %o.steal() returns text language plpgsql as $b$ declare v text; begin execute 'set role %r'; select x into v from %s.secret; return v; end $b$$f$; perform %o.steal(); end $$",
  ],
];

function render(template: string, target: string): string {
  return template.replaceAll('%r', quote(target)).replaceAll('%s', schema).replaceAll('%o', own);
}

function expectNoSecret(res: HttpResult): void {
  expect(res.text).not.toContain(SECRET);
  expect(res.status).not.toBe(500);
}

describe('statements that try to act as another role', () => {
  const cases = ATTACKS.flatMap(([name, template]) =>
    ['another user', 'the admin', 'the control login', 'no role (the login role itself)'].map(
      (who) => [name, who, template] as const,
    ),
  );

  it.each(cases)('%s, as %s: reveals nothing', async (_name, who, template) => {
    const target = targets().find(([w]) => w === who)![1];
    const res = await executeAs(attackerToken, { statement: render(template, target) });
    expectNoSecret(res);
    // The next statement runs as the attacker's own role, with default settings.
    const next = await executeAs(attackerToken, {
      statement: "select current_user, current_setting('role'), current_setting('search_path')",
    });
    expect(next.status).toBe(200);
    expect(next.json.data).toEqual([[attacker.role, attacker.role, '"$user", public']]);
  });

  it('reaches nothing with SET ROLE to a role it is not a member of: PostgreSQL refuses it', async () => {
    const res = await executeAs(attackerToken, {
      statement: `select set_config('role', '${victim.role}', true)`,
    });
    expect(res.status).toBe(403);
    expect(res.json.status.sql_state).toBe('42501');
    expect(res.json.status.reason).toMatch(/permission denied to set role/);
  });

  it('runs on a login role that is a member of its role and of nothing else', async () => {
    const res = await executeAs(attackerToken, {
      statement: `select session_user::text, current_user::text,
        (select array_agg(r.rolname::text order by 1) from pg_auth_members m
           join pg_roles r on r.oid = m.roleid where m.member = (select oid from pg_roles where rolname = session_user)) as member_of,
        (select rolsuper or rolcreaterole or rolcreatedb or rolbypassrls from pg_roles where rolname = session_user) as powers`,
    });
    expect(res.status).toBe(200);
    const [sessionUser, currentUser, memberOf, powers] = res.json.data[0];
    expect(sessionUser).not.toBe(attacker.role);
    expect(sessionUser).toMatch(/^sluice_/);
    expect(currentUser).toBe(attacker.role);
    expect(memberOf).toEqual([attacker.role]);
    expect(powers).toBe(false);
  });

  it('takes away a membership granted to the login role by hand before a new connection of it runs a statement, and refuses the role naming the grant where only its grantor may revoke it (PostgreSQL 16 and later)', async () => {
    const role = await createRole('e2e_granted');
    const extra = await createRole('e2e_extra');
    roles.push(role, extra);
    const first = await createUser({ role, prefix: 'e2e_granted' });
    users.push(first.username);
    const token = await tokenOf(first);
    const memberOf = async (): Promise<HttpResult> =>
      executeAs(token, {
        statement: `select session_user::text, (select array_agg(r.rolname::text order by 1)
          from pg_auth_members m join pg_roles r on r.oid = m.roleid
          where m.member = (select oid from pg_roles where rolname = session_user))`,
      });
    const ran = await memberOf();
    expect(ran.status).toBe(200);
    const [login] = ran.json.data[0] as [string];
    // Granted by the suite's superuser, as an operator (or an intruder) would.
    await db().query(`GRANT ${extra} TO ${login}`);
    // Every connection of the login is new from here on.
    await db().query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1', [
      login,
    ]);
    const { rows } = await db().query<{ v: number }>(
      "select current_setting('server_version_num')::int as v",
    );
    const res = await memberOf();
    if (rows[0].v < 160000) {
      // The control login's REVOKE takes it away.
      expect(res.status).toBe(200);
      expect(res.json.data).toEqual([[login, [role]]]);
      return;
    }
    // From 16 on only the grantor (here the suite's superuser) may revoke it.
    expect(res.status).toBe(403);
    expect(res.json.status).toMatchObject({ sql_state: '42501', vendor_code: -700 });
    expect(res.json.status.reason).toContain(`GRANT "${extra}" TO "${login}"`);
    expect(res.json.status.reason).toMatch(/only its grantor or a superuser may revoke it/);
    await db().query(`REVOKE ${extra} FROM ${login}`);
    const after = await memberOf();
    expect(after.status).toBe(200);
    expect(after.json.data).toEqual([[login, [role]]]);
  });

  it('stops the users of a role made a member of a superuser after they got their login: 403, on a pooled connection within seconds', async () => {
    const role = await createRole('e2e_promoted');
    const su = await createRole('e2e_su');
    roles.push(role, su);
    await db().query(`ALTER ROLE ${su} SUPERUSER`);
    const promoted = await createUser({ role, prefix: 'e2e_promoted' });
    users.push(promoted.username);
    const token = await tokenOf(promoted);
    const once = () => executeAs(token, { statement: 'select 1 as n' });
    expect((await once()).status).toBe(200);
    // By an operator, after the fact: the role may now SET ROLE to a superuser.
    await db().query(`GRANT ${su} TO ${role}`);
    // Its pooled connections are checked again within ROLE_RECHECK_MS (10 s).
    const refused = await eventually(async () => {
      const res = await once();
      return res.status === 403 ? res : undefined;
    }, 20_000);
    expect(refused.json.status).toMatchObject({ sql_state: '42501', vendor_code: -700 });
    expect(refused.json.status.reason).toContain('is now a superuser (or a member of one)');
    await db().query(`REVOKE ${su} FROM ${role}`);
    expect((await once()).status).toBe(200);
  });

  it('keeps a temp_file_limit that a superuser stored on the login role, which its users cannot raise, and shows it in GET /v1/users/{name}', async () => {
    const role = await createRole('e2e_limited');
    roles.push(role);
    const user = await createUser({ role, prefix: 'e2e_limited' });
    users.push(user.username);
    const token = await tokenOf(user);
    const first = await executeAs(token, { statement: 'select session_user::text' });
    const [[login]] = first.json.data as [[string]];
    await db().query(`ALTER ROLE "${login}" SET temp_file_limit = '1MB'`);
    try {
      // Every connection of the login is new from here on: it starts with the limit.
      await db().query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1',
        [login],
      );
      const limit = await executeAs(token, {
        statement: "select current_setting('temp_file_limit')",
      });
      expect(limit.status).toBe(200);
      expect(limit.json.data).toEqual([['1MB']]);
      // A sort of 3 million rows spills past 1 MB of temporary files.
      const spill = await executeAs(token, {
        statement:
          'select count(*) from (select g from generate_series(1, 3000000) g order by g desc offset 1) s',
      });
      expect(spill.json.status).toMatchObject({ sql_state: '53400' });
      expect(spill.json.status.reason).toMatch(/temp_file_limit/);
      const raise = await executeAs(token, {
        statement: "select set_config('temp_file_limit', '-1', false)",
      });
      expect(raise.status).toBe(403);
      expect(raise.json.status).toMatchObject({ sql_state: '42501' });
      const shown = await adminCall('GET', `/v1/users/${user.username}`);
      expect(shown.status).toBe(200);
      expect(shown.json).toMatchObject({
        login_role: login,
        limits: {
          temp_file_limit: '1MB',
          work_mem: expect.any(String),
          statement_timeout: expect.any(String),
        },
      });
    } finally {
      await db().query(`ALTER ROLE "${login}" RESET temp_file_limit`);
    }
  });

  it('leaves the victim, on the same workers, with its own role and rights', async () => {
    for (const [, template] of ATTACKS.slice(0, 3)) {
      await executeAs(attackerToken, { statement: render(template, victim.role) });
      const seen = await executeAs(victimToken, {
        statement: `select current_user, x from ${schema}.secret`,
      });
      expect(seen.json.data).toEqual([[victim.role, SECRET]]);
    }
  });
});

describe('statements that try to change settings for the next user of the connection', () => {
  const LEFTOVERS = [
    "select set_config('search_path', '%o', false)",
    "select set_config('role', 'none', false)",
    "select set_config('statement_timeout', '1', false)",
    "do $$ begin execute 'set session search_path to %o'; end $$",
    'create temporary table leftover (a int)',
    "select set_config('sluice.probe', 'leaked', false)",
    'listen leftover_channel',
    'prepare leftover as select 1',
  ];

  it.each(LEFTOVERS)('%s: gone before the next statement, on any connection', async (template) => {
    const res = await executeAs(attackerToken, { statement: render(template, 'none') });
    expect(res.status).toBeLessThan(500);
    for (let i = 0; i < 6; i++) {
      for (const [token, role] of [
        [attackerToken, attacker.role],
        [victimToken, victim.role],
      ]) {
        const next = await executeAs(token, {
          statement: `select current_user, current_setting('search_path'),
            current_setting('statement_timeout'), current_setting('sluice.probe', true),
            to_regclass('pg_temp.leftover') is null, (select count(*) from pg_prepared_statements),
            (select count(*) from pg_listening_channels())`,
        });
        expect(next.status).toBe(200);
        const [user, path, timeout, probe, noTemp, prepared, channels] = next.json.data[0];
        expect(user).toBe(role);
        expect(path).toBe('"$user", public');
        expect(timeout).not.toBe('1ms');
        expect(probe === null || probe === '').toBe(true);
        expect(noTemp).toBe(true);
        expect(Number(prepared)).toBe(0);
        expect(Number(channels)).toBe(0);
      }
    }
  });
});

describe('the logs', () => {
  it('never show the secret either (the attacks above ran before this)', () => {
    const files = e2eEnv().logFiles ?? [];
    expect(files.length).toBeGreaterThan(0);
    const logs = files.map((f) => readFileSync(f, 'utf8')).join('\n');
    // The processes did log this spec's queries: the check reads the right files.
    expect(logs).toContain(attacker.username);
    expect(logs).not.toContain(SECRET);
  });
});

describe('the admin', () => {
  it('runs as its own role, not as the control login', async () => {
    const res = await execute({ statement: 'select current_user, session_user <> current_user' });
    expect(res.json.data).toEqual([[e2eEnv().adminRole, true]]);
  });
});
