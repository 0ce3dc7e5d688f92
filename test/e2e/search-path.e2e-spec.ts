import { Pool } from 'pg';
import { db, e2eEnv } from './support/client';
import { ExtraApi, startExtraApi } from './support/extra-api';
import { randomName } from './support/service';
import {
  LoggedInUser,
  createLoggedInUser,
  createRole,
  executeAs,
  loginRoleOf,
  usersAndRolesDroppedAfterAll,
} from './support/users';

/**
 * A user whose role may create objects in a database's `public` schema (PostgreSQL 14's default,
 * or a grant) plants there functions and operators that fit the calls of Sluice's own queries
 * better than pg_catalog's, then makes Sluice ask those queries in that database. Sluice's own
 * logins — the control login, which may grant every user role, and the metadata login, which
 * owns `sluice` — must never run them.
 */
const schema = randomName('e2e_sp');
const SECRET = `sp_secret_${randomName('x')}`;
const made = usersAndRolesDroppedAfterAll([schema]);
let attacker: LoggedInUser;
let victimRole: string;

/** A database of its own, whose `public` the attacker's role may create objects in. */
async function trapDatabase(prefix: string): Promise<string> {
  const database = randomName(prefix);
  await db().query(`CREATE DATABASE ${database}`);
  const url = new URL(e2eEnv().databaseUrl);
  url.pathname = `/${database}`;
  const pool = new Pool({ connectionString: url.toString(), max: 1 });
  try {
    await pool.query(`GRANT CREATE ON SCHEMA public TO ${attacker.role}`);
  } finally {
    await pool.end();
  }
  return database;
}

function superUrl(database: string): string {
  const url = new URL(e2eEnv().databaseUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

async function run(statement: string, database: string) {
  return executeAs(attacker.token, { statement, database });
}

async function loginOf(role: string): Promise<string> {
  const { rows } = await db().query<{ login: string }>(
    `SELECT l.rolname AS login FROM pg_roles l JOIN pg_auth_members m ON m.member = l.oid
       JOIN pg_roles r ON r.oid = m.roleid WHERE r.rolname = $1 AND l.rolcanlogin AND l.rolname = $2`,
    [role, loginRoleOf(role)],
  );
  return rows[0].login;
}

beforeAll(async () => {
  victimRole = await createRole('e2e_sp_victim');
  const attackerRole = await createRole('e2e_sp_attacker');
  made.roles.push(victimRole, attackerRole);
  await db().query(`CREATE SCHEMA ${schema}`);
  await db().query(`CREATE TABLE ${schema}.secret (x text)`);
  await db().query(`INSERT INTO ${schema}.secret VALUES ($1)`, [SECRET]);
  await db().query(`GRANT USAGE ON SCHEMA ${schema} TO ${victimRole}, ${attackerRole}`);
  await db().query(`GRANT SELECT ON ${schema}.secret TO ${victimRole}`);
  attacker = await createLoggedInUser(made, { role: attackerRole, prefix: 'e2e_sp_attacker' });
});

describe('objects planted where the control login looks', () => {
  let database: string;

  beforeAll(async () => {
    database = await trapDatabase('e2e_sp_control');
  });

  afterAll(async () => {
    await db().query(`DROP DATABASE ${database} WITH (FORCE)`);
  });

  it('never run as the control login when it repairs the login role in that database', async () => {
    // pg_advisory_xact_lock(integer) fits the provisioner's pg_advisory_xact_lock(hashtext($1))
    // better than pg_catalog's (bigint): run as the control login, it would grant the victim's
    // role to the attacker's.
    const trap = await run(
      `create function public.pg_advisory_xact_lock(k integer) returns void language plpgsql as $f$
       begin
         begin execute 'grant ${victimRole} to ${attacker.role}';
         exception when others then null; end;
         perform pg_catalog.pg_advisory_xact_lock(k::bigint);
       end $f$`,
      database,
    );
    expect(trap.status).toBe(200);
    // Settings stored on its own login role make the next new connection repair it, there ...
    const store = await run(
      `do $$ begin reset role;
         execute format('alter role %I set work_mem = %L', session_user, '5MB'); end $$`,
      database,
    );
    expect(store.status).toBe(200);
    // ... and ending every session of its login makes every connection new.
    await run(
      `do $$ begin reset role; perform pg_terminate_backend(pid) from pg_stat_activity
         where usename = session_user and pid <> pg_backend_pid(); end $$`,
      database,
    );
    await run(
      'do $$ begin reset role; perform pg_terminate_backend(pg_backend_pid()); end $$',
      database,
    );
    const next = await run('select current_user', database);
    expect(next.status).toBe(200);
    // The login role was repaired (its settings are gone) ...
    const login = await loginOf(attacker.role);
    const { rows: settings } = await db().query(
      'SELECT 1 FROM pg_db_role_setting s JOIN pg_roles l ON l.oid = s.setrole WHERE l.rolname = $1',
      [login],
    );
    expect(settings).toEqual([]);
    // ... without the attacker's function: its role reaches nothing more.
    const { rows } = await db().query<{ member: boolean }>(
      `SELECT pg_has_role($1, $2, 'MEMBER') AS member`,
      [attacker.role, victimRole],
    );
    expect(rows[0].member).toBe(false);
    const read = await executeAs(attacker.token, { statement: `select x from ${schema}.secret` });
    expect(read.status).toBe(403);
    expect(read.text).not.toContain(SECRET);
  });
});

describe('objects planted where the metadata login looks', () => {
  let database: string;
  let api: ExtraApi | undefined;

  beforeAll(async () => {
    database = await trapDatabase('e2e_sp_meta');
  });

  afterAll(async () => {
    await api?.stop();
    await db().query(`DROP DATABASE ${database} WITH (FORCE)`);
  });

  it("never run as the metadata login when the attacker's NOTIFY makes it read revocations", async () => {
    // An api keeps its tables in this database; the attacker may connect to it and create in public.
    api = await startExtraApi({ SLUICE_METADATA_DATABASE_URL: superUrl(database) });
    for (const statement of [
      'create table public.loot (who text, username text)',
      'grant insert on public.loot to public',
      // numeric * integer: the revocation reload's extract(epoch …) * 1000 fits it better than
      // pg_catalog's numeric * numeric.
      `create function public.mul(a numeric, b integer) returns numeric language plpgsql as $f$
       begin
         begin insert into public.loot select current_user, username from sluice.users;
         exception when others then insert into public.loot values (current_user, null); end;
         return a operator(pg_catalog.*) b::numeric;
       end $f$`,
      'create operator public.* (function = public.mul, leftarg = numeric, rightarg = integer)',
    ]) {
      expect((await run(statement, database)).status).toBe(200);
    }
    const notify = await run(`select pg_notify('sluice_events', '{"kind":"revoked"}')`, database);
    expect(notify.status).toBe(200);
    // The api re-reads the revocations within moments of the notification.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const loot = await run('select who, username from public.loot', database);
    expect(loot.status).toBe(200);
    expect(loot.json.data).toEqual([]);
  });
});
