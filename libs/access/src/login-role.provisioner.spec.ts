import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { connectTestDatabase, testDatabaseUrl } from '@test/settings';
import { LoginRoleError, LoginRoleProvisioner } from './login-role.provisioner';

/**
 * What a user role may be, checked over a real PostgreSQL by a control login as the README
 * sets it up (CREATEROLE, no superuser): roles that reach beyond themselves are refused or named.
 */
const tag = randomBytes(3).toString('hex');
const control = `prov_spec_control_${tag}`;
const provisioner = new LoginRoleProvisioner(randomBytes(24).toString('base64url'));
const made: string[] = [];
let superuser: Client;
let asControl: Client;

/** A user role made with `options`, grantable by the control login. */
async function role(name: string, options: string): Promise<string> {
  const full = `prov_spec_${name}_${tag}`;
  await superuser.query(`CREATE ROLE ${full} ${options}`);
  made.push(full);
  const { rows } = await superuser.query<{ v: number }>(
    "SELECT current_setting('server_version_num')::int AS v",
  );
  // 16+: CREATEROLE alone no longer lets the control login grant the role.
  if (rows[0].v >= 160000 && !/SUPERUSER/.test(options)) {
    await superuser.query(
      `GRANT ${full} TO ${control} WITH ADMIN OPTION, INHERIT FALSE, SET FALSE`,
    );
  }
  return full;
}

beforeAll(async () => {
  superuser = await connectTestDatabase();
  await superuser.query(`CREATE ROLE ${control} LOGIN CREATEROLE`);
  const url = new URL(testDatabaseUrl);
  url.username = control;
  asControl = new Client({ connectionString: url.toString() });
  await asControl.connect();
});

afterAll(async () => {
  await asControl.end();
  for (const name of made) {
    const login = provisioner.loginFor(name);
    await superuser.query(`DROP ROLE IF EXISTS "${login}"`);
    await superuser.query(`DROP ROLE IF EXISTS ${name}`);
  }
  await superuser.query(`DROP ROLE IF EXISTS ${control}`);
  await superuser.end();
});

/** Provisioning `user` is refused as `kind`, saying `says`, and makes no login role. */
async function expectRefused(user: string, kind: string, says: string): Promise<void> {
  const refused = await provisioner.provision(asControl, user).catch((err: unknown) => err);
  expect(refused).toBeInstanceOf(LoginRoleError);
  expect(refused).toMatchObject({ kind, message: expect.stringContaining(says) as string });
  const { rowCount } = await superuser.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [
    provisioner.loginFor(user),
  ]);
  expect(rowCount).toBe(0);
}

describe(LoginRoleProvisioner.name, () => {
  it('refuses a superuser role as one, not as the control login it also passes for', async () => {
    const su = await role('su', 'SUPERUSER NOLOGIN');
    await expectRefused(su, 'superuser', su);
  });

  it('refuses a member (through another role) of a superuser: it may SET ROLE to it', async () => {
    const su = await role('su_held', 'SUPERUSER NOLOGIN');
    const holder = await role('holds_su', 'NOLOGIN');
    const user = await role('via_su', 'NOLOGIN');
    await superuser.query(`GRANT ${su} TO ${holder}`);
    await superuser.query(`GRANT ${holder} TO ${user}`);
    await expectRefused(user, 'superuser', 'is a superuser (or a member of one)');
  });

  it.each(['pg_read_server_files', 'pg_write_server_files', 'pg_execute_server_program'])(
    'refuses a member (through another role) of %s: it reaches the server itself',
    async (predefined) => {
      const holder = await role(`holds_${predefined}`, 'NOLOGIN');
      const user = await role(`via_${predefined}`, 'NOLOGIN');
      await superuser.query(`GRANT ${predefined} TO ${holder}`);
      await superuser.query(`GRANT ${holder} TO ${user}`);
      await expectRefused(user, 'predefined', `member of ${predefined}`);
    },
  );

  it("refuses a member (through another role) of pg_write_all_data: it writes Sluice's own users", async () => {
    const holder = await role('holds_write_all', 'NOLOGIN');
    const user = await role('via_write_all', 'NOLOGIN');
    await superuser.query(`GRANT pg_write_all_data TO ${holder}`);
    await superuser.query(`GRANT ${holder} TO ${user}`);
    await expectRefused(
      user,
      'predefined',
      'member of pg_write_all_data, which writes every table',
    );
  });

  it('warns of a role that can log in: its users can set its password', async () => {
    const loginable = await role('canlogin', 'LOGIN');
    const done = await provisioner.provision(asControl, loginable);
    expect(done.warnings).toEqual([expect.stringMatching(/can log in: its users can set/)]);
  });

  it('warns of CREATEROLE and BYPASSRLS, and of nothing for a plain NOLOGIN role', async () => {
    const wide = await role('wide', 'NOLOGIN CREATEROLE BYPASSRLS');
    const plain = await role('plain', 'NOLOGIN');
    expect((await provisioner.provision(asControl, wide)).warnings).toEqual([
      expect.stringContaining('has CREATEROLE'),
      expect.stringContaining('has BYPASSRLS'),
    ]);
    expect((await provisioner.provision(asControl, plain)).warnings).toEqual([]);
  });
});
