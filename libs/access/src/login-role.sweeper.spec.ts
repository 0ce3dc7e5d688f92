import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { connectTestDatabase, testDatabaseUrl } from '@test/settings';
import { LoginRoleProvisioner } from './login-role.provisioner';
import { LoginRoleSweeper } from './login-role.sweeper';
import { loginRoleName } from './login.role';

/**
 * After a change of SLUICE_CREDENTIAL_KEY (A to B), over a real PostgreSQL and a control login as
 * the README sets it up (CREATEROLE, no superuser): A's login roles go once unused, and nothing
 * else does.
 */
const tag = randomBytes(3).toString('hex');
const control = `sweep_spec_control_${tag}`;
const keyA = randomBytes(24).toString('base64url');
const keyB = randomBytes(24).toString('base64url');
const made: string[] = [];
const sessions: Client[] = [];
let superuser: Client;
let asControl: Client;

async function create(name: string, options: string): Promise<string> {
  await superuser.query(`CREATE ROLE "${name}" ${options}`);
  made.push(name);
  return name;
}

/** A user role, grantable by the control login. */
async function userRole(name: string): Promise<string> {
  const full = await create(`sweep_spec_${name}_${tag}`, 'NOLOGIN');
  const { rows } = await superuser.query<{ v: number }>(
    "SELECT current_setting('server_version_num')::int AS v",
  );
  // 16+: CREATEROLE alone no longer lets the control login grant the role.
  if (rows[0].v >= 160000) {
    await superuser.query(
      `GRANT ${full} TO ${control} WITH ADMIN OPTION, INHERIT FALSE, SET FALSE`,
    );
  }
  return full;
}

async function exists(role: string): Promise<boolean> {
  const { rowCount } = await superuser.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [role]);
  return rowCount === 1;
}

/** A session logged in as `role` (the test server trusts loopback logins). */
async function sessionAs(role: string): Promise<Client> {
  const url = new URL(testDatabaseUrl);
  url.username = role;
  const client = new Client({ connectionString: url.toString() });
  await client.connect();
  sessions.push(client);
  return client;
}

/** Waits until no backend is logged in as `role`: a backend leaves a moment after its client. */
async function backendsGone(role: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const { rows } = await superuser.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1',
      [role],
    );
    if (rows[0].n === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`backends of ${role} did not end`);
}

beforeAll(async () => {
  superuser = await connectTestDatabase();
  await superuser.query(`CREATE ROLE ${control} LOGIN CREATEROLE`);
  asControl = await sessionAs(control);
});

afterAll(async () => {
  // The spec ends some sessions itself; ending one again is harmless.
  for (const session of sessions) await session.end().catch(() => undefined);
  // Owned by a login role the spec makes: it would keep that role from being dropped.
  await superuser.query(`DROP TABLE IF EXISTS public.sweep_spec_t_${tag}`);
  for (const role of made) {
    for (const key of [keyA, keyB]) {
      await superuser.query(`DROP ROLE IF EXISTS "${loginRoleName(role, key)}"`);
    }
  }
  for (const role of made.reverse()) await superuser.query(`DROP ROLE IF EXISTS "${role}"`);
  await superuser.query(`DROP ROLE IF EXISTS ${control}`);
  await superuser.end();
});

describe(LoginRoleSweeper.name, () => {
  const underA = new LoginRoleProvisioner(keyA);
  const underB = new LoginRoleProvisioner(keyB);
  const sweeper = new LoginRoleSweeper(keyB);

  it("drops the earlier key's login roles once unused, and nothing else", async () => {
    const idle = await userRole('idle');
    const busy = await userRole('busy');
    const owner = await userRole('owner');
    const other = await userRole('other');
    const users = [idle, busy, owner];
    for (const role of users) await underA.provision(asControl, role);
    for (const role of users) await underB.provision(asControl, role);
    const [idleA, busyA, ownerA] = users.map((role) => underA.loginFor(role));

    // Look-alikes that are not login roles Sluice made for a role of its users: left alone.
    const lookalikes = [
      await create(`sluice_abc_x${tag}`, 'LOGIN'),
      await create(`sluice_0123456789_${idle}`, 'NOLOGIN'),
      await create(`sluice_1123456789_${idle}`, 'LOGIN CREATEDB'),
      await create(`sluice_2123456789_${idle}`, 'LOGIN'), // a member of nothing
      await create(`sluice_3123456789_${busy}`, 'LOGIN'), // a member of two roles
      await create(`sluice_4123456789_${owner}`, 'LOGIN'), // a member of another role
      await create(`sluice_5123456789_${other}`, 'LOGIN'), // its role is no Sluice user's
      await create(`sluice_6123456789_${idle}`, 'LOGIN'), // has a member
      await create(`sluice_7123456789_${idle}x`, 'LOGIN'), // named for another role
    ];
    await superuser.query(`GRANT ${idle} TO sluice_0123456789_${idle}, sluice_1123456789_${idle}`);
    await superuser.query(`GRANT ${busy}, ${owner} TO sluice_3123456789_${busy}`);
    await superuser.query(`GRANT ${idle} TO sluice_4123456789_${owner}`);
    await superuser.query(`GRANT ${other} TO sluice_5123456789_${other}`);
    await superuser.query(`GRANT ${idle} TO sluice_6123456789_${idle}, sluice_7123456789_${idle}x`);
    await superuser.query(`GRANT sluice_6123456789_${idle} TO sluice_abc_x${tag}`);

    // A worker still on key A holds a connection of busy's login role; a user's statement made
    // a table as owner's login role (RESET ROLE, then CREATE TABLE).
    const worker = await sessionAs(busyA);
    const table = `sweep_spec_t_${tag}`;
    await superuser.query(`CREATE TABLE public.${table} (x int)`);
    await superuser.query(`ALTER TABLE public.${table} OWNER TO "${ownerA}"`);

    const first = await sweeper.sweep(asControl, users);
    expect(first.dropped).toEqual([{ login: idleA, role: idle }]);
    expect(first.kept).toEqual(
      expect.arrayContaining([
        {
          login: busyA,
          role: busy,
          why: 'in-use',
          detail: expect.stringContaining('backend') as unknown,
        },
        {
          login: ownerA,
          role: owner,
          why: 'blocked',
          detail: expect.stringContaining(`owner of table ${table}`) as unknown,
        },
      ]),
    );
    expect(first.kept).toHaveLength(2);
    expect(await exists(idleA)).toBe(false);
    for (const role of [busyA, ownerA, ...lookalikes])
      expect([role, await exists(role)]).toEqual([role, true]);
    for (const role of users) {
      const current = underB.loginFor(role);
      expect([current, await exists(current)]).toEqual([current, true]);
    }

    // Once the worker's connection ends, the next sweep drops busy's; owner's waits for its table.
    await worker.end();
    await backendsGone(busyA);
    const second = await sweeper.sweep(asControl, users);
    expect(second.dropped).toEqual([{ login: busyA, role: busy }]);
    expect(second.kept).toEqual([expect.objectContaining({ login: ownerA, why: 'blocked' })]);
    await superuser.query(`DROP TABLE public.${table}`);
    const third = await sweeper.sweep(asControl, users);
    expect(third).toEqual({ dropped: [{ login: ownerA, role: owner }], kept: [] });
    for (const role of lookalikes) expect([role, await exists(role)]).toEqual([role, true]);
    expect(await sweeper.sweep(asControl, users)).toEqual({ dropped: [], kept: [] });
  });

  it("never drops the current key's login roles", async () => {
    const role = await userRole('current');
    await underB.provision(asControl, role);
    expect(await sweeper.sweep(asControl, [role])).toEqual({ dropped: [], kept: [] });
    expect(await exists(underB.loginFor(role))).toBe(true);
  });
});
