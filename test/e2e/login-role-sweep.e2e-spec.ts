import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { LoginRoleProvisioner } from '@app/access';
import { e2eEnv, eventually } from './support/client';
import { dropRoleAndLogins, grantToControl } from './support/roles';
import { ServiceProcess, freePort, startProcess, waitForApi } from './support/service';
import { call } from './support/users';

/**
 * After a change of SLUICE_CREDENTIAL_KEY, an api drops the login roles made under the earlier key
 * once no backend uses them, at start-up and every SLUICE_LOGIN_ROLE_SWEEP_SECONDS. Its own
 * deployment: one standalone api over the local PostgreSQL's control login, with a metadata
 * database of its own, so that only this spec's users' roles are swept.
 */
const tag = randomBytes(3).toString('hex');
const metadataDb = `sweep_meta_${tag}`;
const keyA = randomBytes(24).toString('base64url');
const keyB = randomBytes(24).toString('base64url');
const roles = {
  admin: `sweep_admin_${tag}`,
  idle: `sweep_idle_${tag}`,
  busy: `sweep_busy_${tag}`,
};
const admin = { user: `sweep_admin_${tag}`, password: randomBytes(9).toString('base64url') };
const dataDir = join(tmpdir(), `sluice-sweep-${tag}`);
let superuser: Client;
let api: ServiceProcess | undefined;
let baseUrl: string;
let worker: Client | undefined;

function urlAs(user: string, database?: string): string {
  const url = new URL(e2eEnv().local.superUrl);
  url.username = user;
  url.password = '';
  if (database) url.pathname = `/${database}`;
  return url.toString();
}

/** The messages the api logged (one JSON object a line) that contain `text`. */
function logged(text: string): string[] {
  const messages: string[] = [];
  for (const line of api!.output().split('\n')) {
    try {
      const { msg } = JSON.parse(line) as { msg?: unknown };
      if (typeof msg === 'string' && msg.includes(text)) messages.push(msg);
    } catch {
      // not a log line
    }
  }
  return messages;
}

/** True once the api logged that it dropped `login`, undefined until then. */
function droppedLogged(login: string, role: string): true | undefined {
  const lines = logged(`dropped login role "${login}" of role "${role}"`);
  expect(lines.length).toBeLessThanOrEqual(1);
  return lines.length === 1 ? true : undefined;
}

async function exists(role: string): Promise<boolean> {
  const { rowCount } = await superuser.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [role]);
  return rowCount === 1;
}

beforeAll(async () => {
  const { local } = e2eEnv();
  superuser = new Client({ connectionString: local.superUrl });
  await superuser.connect();
  await superuser.query(`CREATE DATABASE ${metadataDb}`);
  for (const role of Object.values(roles)) {
    await superuser.query(`CREATE ROLE ${role} NOLOGIN`);
    await grantToControl(superuser, role, local.controlRole);
  }
  // Sluice as it ran under key A: a login role for each user role.
  const control = new Client({ connectionString: local.env.DATABASE_URL });
  await control.connect();
  const underA = new LoginRoleProvisioner(keyA);
  for (const role of Object.values(roles)) await underA.provision(control, role);
  await control.end();
  // A worker still on key A holds a connection of busy's login role (loopback logins are trusted).
  worker = new Client({ connectionString: urlAs(underA.loginFor(roles.busy)) });
  await worker.connect();

  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  api = startProcess('api', {
    DATABASE_URL: local.env.DATABASE_URL,
    SLUICE_METADATA_DATABASE_URL: urlAs(new URL(local.superUrl).username, metadataDb),
    SLUICE_CREDENTIAL_KEY: keyB,
    SLUICE_LOGIN_ROLE_SWEEP_SECONDS: '1',
    SLUICE_JWT_SECRET: randomBytes(24).toString('hex'),
    SLUICE_ADMIN_USER: admin.user,
    SLUICE_ADMIN_PASSWORD: admin.password,
    SLUICE_ADMIN_ROLE: roles.admin,
    SLUICE_DATA_DIR: dataDir,
    SLUICE_WORKER_THREADS: '1',
    PORT: String(port),
    HOST: '127.0.0.1',
  });
  await waitForApi(baseUrl, api, 60_000);
});

afterAll(async () => {
  await worker?.end().catch(() => undefined); // a test may have ended it
  await api?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  await superuser.query(`DROP DATABASE IF EXISTS ${metadataDb} WITH (FORCE)`);
  for (const role of Object.values(roles)) await dropRoleAndLogins(superuser, role);
  await superuser.end();
});

describe('the sweep of login roles after a change of SLUICE_CREDENTIAL_KEY', () => {
  const underA = new LoginRoleProvisioner(keyA);
  const underB = new LoginRoleProvisioner(keyB);

  it("drops the earlier key's unused login roles of Sluice's users, and says so", async () => {
    const basic = `Basic ${Buffer.from(`${admin.user}:${admin.password}`).toString('base64')}`;
    for (const role of [roles.idle, roles.busy]) {
      const made = await call(
        baseUrl,
        'POST',
        '/v1/users',
        { username: role, password: randomBytes(9).toString('base64url'), role },
        { authorization: basic },
      );
      expect(made.status).toBe(201);
    }
    for (const role of [roles.admin, roles.idle]) {
      const login = underA.loginFor(role);
      await eventually(async () => ((await exists(login)) ? undefined : true), 15_000);
      // Logged once the sweep is over, a moment after the drop.
      await eventually(() => Promise.resolve(droppedLogged(login, role)));
    }
    // The new key's login roles are there, and statements run over them.
    for (const role of Object.values(roles)) expect(await exists(underB.loginFor(role))).toBe(true);
    const res = await call(
      baseUrl,
      'POST',
      '/v1/execute',
      { statement: 'select session_user::text' },
      { authorization: basic },
    );
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([[underB.loginFor(roles.admin)]]);
  });

  it('keeps one a backend is logged in as, says it waits, and drops it once the backend ends', async () => {
    const busyA = underA.loginFor(roles.busy);
    await eventually(() =>
      Promise.resolve(logged(`"${busyA}" (1 backend`).length > 0 ? true : undefined),
    );
    expect(await exists(busyA)).toBe(true);
    await worker!.end();
    await eventually(async () => ((await exists(busyA)) ? undefined : true), 15_000);
    await eventually(() => Promise.resolve(droppedLogged(busyA, roles.busy)));
  });
});
