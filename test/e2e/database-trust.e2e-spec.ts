import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { e2eEnv } from './support/client';
import { ServiceProcess, freePort, randomName, startProcess, waitForApi } from './support/service';
import { basic, call, expectEnvelope } from './support/users';

/**
 * Database users (SLUICE_AUTH=database) on a PostgreSQL that checks no password: the suite's own
 * server, whose pg_hba.conf trusts every loopback login (as many development and container
 * set-ups do). PostgreSQL lets any name in there with any password, so every login must be
 * refused, superusers' and Sluice's own logins' first. One standalone process (no Redis) on it.
 */
const dataDir = join(tmpdir(), `sluice-dbtrust-${randomBytes(4).toString('hex')}`);
const plain = randomName('dbtrust_user');
const holder = randomName('dbtrust_files');
let superuser: Client;
let api: ServiceProcess;
let baseUrl: string;
/** Who the attacks log in as: every kind of role, by what it is. */
let targets: [string, string][];

beforeAll(async () => {
  const { local } = e2eEnv();
  superuser = new Client({ connectionString: local.superUrl });
  await superuser.connect();
  // Fails where the server asks for passwords: then this spec would prove nothing.
  const probe = new Client({ connectionString: local.superUrl, password: 'not the password' });
  await probe.connect();
  await probe.end();
  await superuser.query(`CREATE ROLE ${plain} LOGIN PASSWORD 'the-right-one'`);
  await superuser.query(`CREATE ROLE ${holder} LOGIN PASSWORD 'the-right-one'`);
  await superuser.query(`GRANT pg_execute_server_program TO ${holder}`);
  const metadataLogin = new URL(local.env.SLUICE_METADATA_DATABASE_URL).username;
  targets = [
    ['a superuser (postgres)', 'postgres'],
    [`the superuser of the suite (${metadataLogin}), also the metadata login`, metadataLogin],
    ['the control login of DATABASE_URL', local.controlRole],
    ['a member of pg_execute_server_program', holder],
    ['a plain login role', plain],
  ];
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  api = startProcess('api', {
    ...local.env,
    SLUICE_AUTH: 'database',
    SLUICE_DATA_DIR: dataDir,
    // Every attack below is a failed login: none may be refused for their number instead.
    SLUICE_LOGIN_MAX_FAILURES: '1000',
    SLUICE_LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
    PORT: String(port),
    HOST: '127.0.0.1',
  });
  await waitForApi(baseUrl, api, 60_000);
}, 90_000);

afterAll(async () => {
  await api?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  for (const role of [plain, holder]) await superuser?.query(`DROP ROLE IF EXISTS ${role}`);
  await superuser?.end();
});

function expectUnverified(res: { status: number; json: unknown; text: string } & object): void {
  expect(res.status).toBe(401);
  expectEnvelope(res as Parameters<typeof expectEnvelope>[0], '28000', -307);
  expect((res.json as { status: { reason: string } }).status.reason).toMatch(
    /without asking for its password.*pg_hba\.conf/,
  );
}

describe('database users on a server that trusts the connection', () => {
  it('refuses a wrong password at /v1/login for every kind of role: 401 (-307) naming pg_hba.conf, no token', async () => {
    for (const [, username] of targets) {
      const res = await call(baseUrl, 'POST', '/v1/login', { username, password: 'wrong' });
      expectUnverified(res);
      expect(res.text).not.toContain('access_token');
    }
  });

  it('refuses the right password too: PostgreSQL checked nothing', async () => {
    const res = await call(baseUrl, 'POST', '/v1/login', {
      username: plain,
      password: 'the-right-one',
    });
    expectUnverified(res);
  });

  it('refuses Basic credentials on /v1/execute: no statement runs as the role', async () => {
    for (const [, username] of targets) {
      const res = await call(
        baseUrl,
        'POST',
        '/v1/execute',
        { statement: 'select current_user' },
        basic(username, 'wrong'),
      );
      expectUnverified(res);
    }
  });

  it('refuses a sign-in to the admin pages, and sets no cookie', async () => {
    for (const [, username] of targets) {
      const res = await call(baseUrl, 'POST', '/admin/session', { username, password: 'wrong' });
      expect(res.status).toBe(401);
      expect(res.headers.getSetCookie()).toEqual([]);
    }
  });

  it('refuses a login naming a database that does not exist the same way (not UNKNOWN_DATABASE)', async () => {
    const res = await call(baseUrl, 'POST', '/v1/login', {
      username: 'postgres',
      password: 'wrong',
      database: `no_such_db_${randomBytes(4).toString('hex')}`,
    });
    expectUnverified(res);
  });

  it('warns at start-up that the control login was not asked for a password', async () => {
    const warned = () =>
      /ROLE ISOLATION: PostgreSQL let .* \(DATABASE_URL\) in without asking for a password.*every login is refused/.test(
        api.output(),
      );
    for (let i = 0; i < 100 && !warned(); i++) await new Promise((r) => setTimeout(r, 100));
    expect(warned()).toBe(true);
  });
});
