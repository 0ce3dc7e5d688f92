import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import Redis from 'ioredis';
import { Pool } from 'pg';
import { testDatabaseUrl as DATABASE_URL } from '../settings';
import { e2eEnv } from './support/client';
import { ServiceProcess, freePort, startProcess, waitForApi } from './support/service';
import { TcpProxy } from './support/tcp.proxy';

/**
 * Fault injection over a deployment of this spec's own — api and worker processes and a Redis
 * server that it may kill — so that the rest of the suite is not disturbed. Loopback only.
 */
const admin = { user: 'faults_admin', password: randomBytes(9).toString('base64url') };
let redisPort: number;
let redisServer: ChildProcess | undefined;
let env: Record<string, string>;
let baseUrl: string;
let postgres: TcpProxy;
const processes: ServiceProcess[] = [];
const db = new Pool({ connectionString: DATABASE_URL, max: 2 });

async function startRedis(): Promise<void> {
  redisServer = spawn(
    'redis-server',
    ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  for (let i = 0; i < 100; i++) {
    const probe = new Redis({ port: redisPort, lazyConnect: true, retryStrategy: () => null });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
      await probe.ping();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    } finally {
      probe.disconnect();
    }
  }
  throw new Error('redis-server did not start');
}

async function stopRedis(): Promise<void> {
  if (!redisServer) return;
  const exited = once(redisServer, 'exit');
  redisServer.kill('SIGKILL');
  await exited;
  redisServer = undefined;
}

/** Not exited: a process killed by a signal has no exit code either. */
function alive(proc: ServiceProcess): boolean {
  return proc.child.exitCode === null && proc.child.signalCode === null;
}

function start(app: 'api' | 'worker'): ServiceProcess {
  const proc = startProcess(app, env);
  processes.push(proc);
  return proc;
}

async function token(): Promise<string> {
  const res = await fetch(`${baseUrl}/v1/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: admin.user, password: admin.password }),
  });
  return ((await res.json()) as { access_token: string }).access_token;
}

/** POSTs a statement and resolves with status, body and whether the body arrived whole. */
function execute(
  statement: string,
  bearer: string,
): Promise<{ status: number; body: string; complete: boolean }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${baseUrl}/v1/execute`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('close', () => resolve({ status: res.statusCode ?? 0, body, complete: res.complete }));
    });
    req.end(JSON.stringify({ statement }));
  });
}

async function backends(marker: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    "select count(*)::int as n from pg_stat_activity where application_name like 'sluice:%' and query like $1",
    [`%${marker}%`],
  );
  return rows[0].n;
}

async function until(check: () => Promise<boolean>, ms: number): Promise<number> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > ms) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return Date.now() - started;
}

beforeAll(async () => {
  redisPort = await freePort();
  await startRedis();
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  // PostgreSQL is reached through a proxy that a test can cut, as if the server restarted.
  const target = new URL(DATABASE_URL);
  postgres = new TcpProxy(await freePort(), Number(target.port || 5432));
  await postgres.start();
  const local = e2eEnv().local.env;
  const proxied = new URL(local.DATABASE_URL);
  proxied.port = String(postgres.port);
  env = {
    ...local,
    DATABASE_URL: proxied.toString(),
    REDIS_URL: `redis://127.0.0.1:${redisPort}`,
    SLUICE_JWT_SECRET: randomBytes(24).toString('hex'),
    SLUICE_ADMIN_USER: admin.user,
    SLUICE_ADMIN_PASSWORD: admin.password,
    SLUICE_KEY_PREFIX: `faults-${randomBytes(3).toString('hex')}`,
    SLUICE_WORKER_THREADS: '1',
    SLUICE_PRODUCER_SILENCE_MS: '1000',
    SLUICE_WORKER_METRICS_PORT: '0',
    PORT: String(port),
    HOST: '127.0.0.1',
  };
  const api = start('api');
  start('worker');
  await waitForApi(baseUrl, api);
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop('SIGKILL')));
  await stopRedis();
  await postgres.stop();
  await db.query('DELETE FROM sluice.users WHERE username = $1', [admin.user]);
  await db.end();
});

describe('fault tolerance', () => {
  it('ends the response with an error when the worker is killed mid-query, and never runs the statement again', async () => {
    const bearer = await token();
    const marker = `kill_worker_${randomBytes(3).toString('hex')}`;
    const pending = execute(`select pg_sleep(60), '${marker}'`, bearer);
    await until(async () => (await backends(marker)) === 1, 10_000);
    const worker = processes.find(
      (p) => p.child.spawnargs.join(' ').includes('worker') && alive(p),
    )!;
    await worker.stop('SIGKILL');
    // PostgreSQL notices the dead client (client_connection_check_interval) and ends the statement.
    await until(async () => (await backends(marker)) === 0, 5_000);
    const replacement = start('worker');
    const res = await pending;
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body)).toMatchObject({ status: { vendor_code: -110 } });
    // The new worker takes new work but not the dead one's statement.
    await until(() => Promise.resolve(replacement.output().includes('ready')), 20_000);
    const after = await execute('select 1 as ok', bearer);
    expect(after.status).toBe(200);
    expect(await backends(marker)).toBe(0);
  }, 90_000);

  it('cancels the statement when the api reading it is killed', async () => {
    const bearer = await token();
    const marker = `kill_api_${randomBytes(3).toString('hex')}`;
    void execute(`select pg_sleep(60), '${marker}'`, bearer).catch(() => undefined);
    await until(async () => (await backends(marker)) === 1, 10_000);
    const api = processes.find((p) => p.child.spawnargs.join(' ').includes('/api/') && alive(p))!;
    await api.stop('SIGKILL');
    // The api's alive key expires within 6 s; the worker then cancels the statement.
    const took = await until(async () => (await backends(marker)) === 0, 15_000);
    expect(took).toBeLessThan(15_000);
    const restarted = start('api');
    await waitForApi(baseUrl, restarted);
  }, 60_000);

  it('fails in-flight queries clearly when Redis restarts, and serves new ones once it is back', async () => {
    const bearer = await token();
    const marker = `redis_${randomBytes(3).toString('hex')}`;
    const pending = execute(`select pg_sleep(3), '${marker}'`, bearer);
    await until(async () => (await backends(marker)) === 1, 10_000);
    await stopRedis();
    const res = await pending;
    // Either an error envelope before the body, or a body cut short: never a truncated success.
    if (res.complete) {
      expect(res.status).toBeGreaterThanOrEqual(500);
      expect(JSON.parse(res.body)).toMatchObject({ status: { vendor_code: expect.any(Number) } });
    }
    await startRedis();
    await until(async () => {
      const again = await execute('select 42 as answer', bearer).catch(() => undefined);
      return again?.status === 200 && again.body.includes('[[42]]');
    }, 30_000);
  }, 60_000);

  it('answers 503 with SQLSTATE class 08 while PostgreSQL is down, and recovers after', async () => {
    const bearer = await token();
    await postgres.stop();
    try {
      const res = await execute('select 1 as one', bearer);
      expect(res.status).toBe(503);
      expect(JSON.parse(res.body).status.sql_state).toMatch(/^08/);
    } finally {
      await postgres.start();
    }
    await until(async () => (await execute('select 1 as one', bearer)).status === 200, 20_000);
  }, 60_000);

  it('lets a worker finish its running query on SIGTERM, then exit; another takes new work', async () => {
    const bearer = await token();
    const worker = processes.find(
      (p) => p.child.spawnargs.join(' ').includes('worker') && alive(p),
    )!;
    const marker = `sigterm_worker_${randomBytes(3).toString('hex')}`;
    const pending = execute(`select pg_sleep(1.5), '${marker}' as m`, bearer);
    await until(async () => (await backends(marker)) === 1, 10_000);
    const exiting = worker.stop('SIGTERM');
    const res = await pending;
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).status.sql_state).toBe('00000');
    await exiting;
    expect(worker.child.exitCode !== null || worker.child.signalCode !== null).toBe(true);
    start('worker');
    await until(async () => (await execute('select 1', bearer)).status === 200, 20_000);
  }, 60_000);

  it('stops the api cleanly on SIGTERM after finishing the response in flight', async () => {
    const bearer = await token();
    const api = processes.find((p) => p.child.spawnargs.join(' ').includes('/api/') && alive(p))!;
    const pending = execute('select pg_sleep(1.5), 7 as seven', bearer);
    await new Promise((r) => setTimeout(r, 500));
    const stopping = api.stop('SIGTERM');
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.complete).toBe(true);
    expect(JSON.parse(res.body).status.sql_state).toBe('00000');
    // 0: it closed everything itself, without waiting out the grace period for idle clients.
    expect(await stopping).toBe(0);
    const restarted = start('api');
    await waitForApi(baseUrl, restarted);
  }, 60_000);
});
