import { randomBytes } from 'node:crypto';
import { Client, ClientBase } from 'pg';

/**
 * A PostgreSQL set up the way the README asks of production: a control login that may create
 * roles and cancel statements (no superuser, member of no user role), an admin role, and the
 * settings every Sluice process on it needs.
 */
export interface ServiceDatabase {
  /** Superuser URL, for set-up and checks only. */
  superUrl: string;
  controlRole: string;
  adminRole: string;
  /**
   * DATABASE_URL, SLUICE_METADATA_DATABASE_URL, SLUICE_CREDENTIAL_KEY, SLUICE_ADMIN_ROLE,
   * SLUICE_LOGIN_ROLE_SWEEP_SECONDS (0).
   */
  env: Record<string, string>;
}

async function withClient<T>(url: string, work: (c: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** `GRANT role TO control` the way the README says for the server's version. */
export async function grantToControl(
  client: ClientBase,
  role: string,
  control: string,
): Promise<void> {
  const { rows } = await client.query<{ v: number }>(
    "SELECT current_setting('server_version_num')::int AS v",
  );
  // 16+: the grant lets the control login hand the role on, not use it.
  const options = rows[0].v >= 160000 ? 'ADMIN OPTION, INHERIT FALSE, SET FALSE' : 'ADMIN OPTION';
  await client.query(`GRANT ${role} TO ${control} WITH ${options}`);
}

/** Creates the control login and admin role on the server of `superUrl` (a superuser's URL). */
export async function prepareServiceDatabase(superUrl: string): Promise<ServiceDatabase> {
  const tag = randomBytes(3).toString('hex');
  const controlRole = `e2e_control_${tag}`;
  const adminRole = `e2e_admin_role_${tag}`;
  const password = randomBytes(12).toString('base64url');
  const database = decodeURIComponent(new URL(superUrl).pathname.slice(1));
  await withClient(superUrl, async (c) => {
    await c.query(`CREATE ROLE ${controlRole} LOGIN CREATEROLE PASSWORD '${password}'`);
    await c.query(`GRANT pg_signal_backend TO ${controlRole}`);
    // The admin creates and drops tables in the tests, in public and in schemas of its own.
    await c.query(`CREATE ROLE ${adminRole} NOLOGIN`);
    await c.query(`GRANT CREATE, CONNECT, TEMPORARY ON DATABASE "${database}" TO ${adminRole}`);
    await c.query(`GRANT CREATE, USAGE ON SCHEMA public TO ${adminRole}`);
    await grantToControl(c, adminRole, controlRole);
  });
  const control = new URL(superUrl);
  control.username = controlRole;
  control.password = password;
  return {
    superUrl,
    controlRole,
    adminRole,
    env: {
      DATABASE_URL: control.toString(),
      SLUICE_METADATA_DATABASE_URL: superUrl,
      SLUICE_CREDENTIAL_KEY: randomBytes(24).toString('base64url'),
      SLUICE_ADMIN_ROLE: adminRole,
      // Test runs on this server share its metadata database, each with a key of its own: a
      // sweep would drop the other runs' login roles whenever they sit unused.
      SLUICE_LOGIN_ROLE_SWEEP_SECONDS: '0',
    },
  };
}

/** Drops a role and the login roles Sluice made for it (and what each owns here). */
export async function dropRoleAndLogins(client: ClientBase, role: string): Promise<void> {
  const { rows } = await client.query<{ login: string }>(
    `SELECT u.rolname AS login FROM pg_auth_members m
       JOIN pg_roles r ON r.oid = m.roleid JOIN pg_roles u ON u.oid = m.member
      WHERE r.rolname = $1 AND u.rolname ~ '^sluice_[0-9a-f]{10}_' AND u.rolcanlogin`,
    [role],
  );
  for (const name of [...rows.map((r) => r.login), role]) {
    await client.query(`DROP OWNED BY "${name}"`).catch(() => undefined); // gone already
    await whileConcurrentlyUpdated(() => client.query(`DROP ROLE IF EXISTS "${name}"`));
  }
}

/**
 * Runs a change of the role catalogue again while PostgreSQL answers "tuple concurrently
 * updated": the deployment under test may grant or revoke the same role's memberships at that
 * moment (a worker provisioning its login role), and the catalogue takes one change of a row at
 * a time. Any other error is thrown at once.
 */
async function whileConcurrentlyUpdated<T>(change: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await change();
    } catch (err) {
      if (attempt >= 10 || !/tuple concurrently updated/.test((err as Error).message)) throw err;
      await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
    }
  }
}

/** Undoes prepareServiceDatabase. */
export async function dropServiceDatabase(sd: ServiceDatabase): Promise<void> {
  await withClient(sd.superUrl, async (c) => {
    await dropRoleAndLogins(c, sd.adminRole);
    await c.query(`DROP OWNED BY ${sd.controlRole}`);
    await c.query(`DROP ROLE IF EXISTS ${sd.controlRole}`);
  });
}
