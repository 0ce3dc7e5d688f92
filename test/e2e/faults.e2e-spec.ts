import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { Pool } from 'pg';
import { testDatabaseUrl as DATABASE_URL } from '../settings';
import { RedisKeys } from '@app/transport';
import { e2eEnv, until } from './support/client';
import {
  ServiceProcess,
  freePort,
  startProcess,
  waitForApi,
  workerStarted,
} from './support/service';
import { freshToken } from './support/users';
import { TcpProxy } from '../support/tcp.proxy';

/**
 * Fault injection over a deployment of this spec's own — api and worker processes and a Redis
 * server that it may kill — so that the rest of the suite is not disturbed. Loopback only.
 */
// A name of this run's own: runs from other checkouts share the users table, and one's end
// deleting another's admin would fail everything after in the other.
const admin = {
  user: `faults_admin_${randomBytes(3).toString('hex')}`,
  password: randomBytes(9).toString('base64url'),
};
let redisPort: number;
let redisServer: ChildProcess | undefined;
let env: Record<string, string>;
let baseUrl: string;
let postgres: TcpProxy;
const processes: ServiceProcess[] = [];
const db = new Pool({ connectionString: DATABASE_URL, max: 2 });
/** The workers' hold on a job (SLUICE_JOB_LOCK_MS): a dead worker's job is noticed past it. */
const JOB_LOCK_MS = 4_000;
/** The apis' alive-key beat (SLUICE_READER_BEAT_MS): a dead api's key lapses within 3 beats. */
const READER_BEAT_MS = 1_000;

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

function token(): Promise<string> {
  return freshToken(admin.user, admin.password, baseUrl);
}

/** POSTs a statement and resolves with status, headers, body and whether the body arrived whole. */
function execute(
  statement: string,
  bearer: string,
  options: { accept?: string; fetchSize?: number; onLine?: (line: string) => void } = {},
): Promise<{
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  complete: boolean;
}> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${baseUrl}/v1/execute`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${bearer}`,
        ...(options.accept ? { accept: options.accept } : {}),
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let body = '';
      res.on('data', (c: Buffer) => {
        const before = body;
        body += c.toString();
        if (!options.onLine) return;
        // Each complete line, once.
        const lines = body.split('\n');
        for (let i = before.split('\n').length - 1; i < lines.length - 1; i++) {
          options.onLine(lines[i]);
        }
      });
      res.on('close', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body,
          complete: res.complete,
        }),
      );
    });
    req.end(JSON.stringify({ statement, fetch_size: options.fetchSize }));
  });
}

async function queryInfo(queryId: string, bearer: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${baseUrl}/v1/queries/${queryId}`, {
    headers: { authorization: `Bearer ${bearer}` },
  });
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

/** The worker processes still running. */
function liveWorkers(): ServiceProcess[] {
  return processes.filter((p) => p.child.spawnargs.join(' ').includes('worker') && alive(p));
}

/**
 * Removes the heartbeats of the workers killed so far: a killed worker cannot remove its own, and
 * the apis count it alive for three beats more — which a test that is about stopped workers
 * must not depend on.
 */
async function forgetKilledWorkers(): Promise<void> {
  const killed = processes.filter(
    (p) => p.child.spawnargs.join(' ').includes('worker') && !alive(p),
  );
  const redis = new Redis({ port: redisPort, maxRetriesPerRequest: 1 });
  try {
    const key = `${env.SLUICE_KEY_PREFIX}:workers`;
    const ids = Object.keys(await redis.hgetall(key));
    const gone = ids.filter((id) => killed.some((p) => id.includes(`:${p.child.pid}:`)));
    if (gone.length > 0) await redis.hdel(key, ...gone);
  } finally {
    redis.disconnect();
  }
}

/** The only worker still running, once it takes jobs. */
async function onlyWorker(): Promise<ServiceProcess> {
  expect(liveWorkers()).toHaveLength(1);
  const [worker] = liveWorkers();
  await until(() => Promise.resolve(workerStarted(worker)), 30_000);
  return worker;
}

/** Starts a worker and waits until it takes jobs. */
async function startWorker(): Promise<ServiceProcess> {
  const worker = start('worker');
  await until(() => Promise.resolve(workerStarted(worker)), 30_000);
  return worker;
}

async function backends(marker: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    "select count(*)::int as n from pg_stat_activity where application_name like 'sluice:%' and query like $1",
    [`%${marker}%`],
  );
  return rows[0].n;
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
    SLUICE_JOB_LOCK_MS: String(JOB_LOCK_MS),
    SLUICE_READER_BEAT_MS: String(READER_BEAT_MS),
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
  it('ends a stream+json response with a final error line within 15 s when its only worker is killed, and never runs the statement again', async () => {
    const bearer = await token();
    const marker = `kill_stream_${randomBytes(3).toString('hex')}`;
    const [worker] = liveWorkers();
    expect(liveWorkers()).toHaveLength(1);
    let queryId = '';
    let killedAt = 0;
    const res = await execute(
      `select g, pg_sleep(0.2), '${marker}' as m from generate_series(1, 200) g`,
      bearer,
      {
        accept: 'application/stream+json',
        fetchSize: 1,
        onLine: (line) => {
          const parsed = JSON.parse(line) as { query_id?: string; data?: unknown };
          if (parsed.query_id) queryId = parsed.query_id;
          if (parsed.data && killedAt === 0) {
            killedAt = Date.now();
            // No replacement: nobody is left to run BullMQ's stalled-job check.
            void worker.stop('SIGKILL');
          }
        },
      },
    );
    const tookMs = Date.now() - killedAt;
    expect(killedAt).toBeGreaterThan(0);
    expect(res.status).toBe(200);
    expect(res.complete).toBe(true);
    const lines = res.body.trimEnd().split('\n');
    expect(JSON.parse(lines[lines.length - 1])).toEqual({
      status: {
        reason: expect.stringContaining('worker') as string,
        sql_state: '58000',
        vendor_code: -110,
      },
    });
    expect(tookMs).toBeLessThan(15_000);
    expect(liveWorkers()).toHaveLength(0);
    const info = await queryInfo(queryId, bearer);
    expect(info).toMatchObject({
      state: 'failed',
      status: { vendor_code: -110, reason: expect.stringContaining('worker') as string },
    });
    // PostgreSQL ends the dead worker's statement (client_connection_check_interval).
    await until(async () => (await backends(marker)) === 0, 10_000);
    // A new worker's stalled check finds the job without its lock and fails it unrun.
    const jobs = new Queue('execute', {
      connection: { port: redisPort, host: '127.0.0.1' },
      prefix: `{${env.SLUICE_KEY_PREFIX}}`,
    });
    try {
      await startWorker();
      let ranAgain = 0;
      await until(async () => {
        ranAgain = Math.max(ranAgain, await backends(marker));
        return (await jobs.getJobState(queryId)) === 'failed';
      }, 30_000);
      // Watch a little longer: a re-run would show within a stalled-check interval.
      for (const end = Date.now() + 3000; Date.now() < end;) {
        ranAgain = Math.max(ranAgain, await backends(marker));
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(ranAgain).toBe(0);
      expect((await jobs.getJob(queryId))?.failedReason).toBe(
        'job stalled more than allowable limit',
      );
    } finally {
      await jobs.close();
    }
    expect(await queryInfo(queryId, bearer)).toMatchObject({ state: 'failed' });
    const after = await execute('select 1 as ok', bearer);
    expect(after.status).toBe(200);
  }, 120_000);

  it('answers 503 with the envelope within 15 s when the only worker is killed before any byte', async () => {
    const bearer = await token();
    const marker = `kill_worker_${randomBytes(3).toString('hex')}`;
    const [worker] = liveWorkers();
    expect(liveWorkers()).toHaveLength(1);
    const pending = execute(`select pg_sleep(60), '${marker}'`, bearer);
    await until(async () => (await backends(marker)) === 1, 10_000);
    const killedAt = Date.now();
    await worker.stop('SIGKILL');
    const res = await pending;
    expect(Date.now() - killedAt).toBeLessThan(15_000);
    expect(res.status).toBe(503);
    // About when a new worker's first heartbeat would show (SLUICE_WORKER_HEARTBEAT_MS, 5 s).
    const heartbeatMs = Number(env.SLUICE_WORKER_HEARTBEAT_MS ?? 5_000);
    expect(res.headers['retry-after']).toBe(String(Math.ceil(heartbeatMs / 1000)));
    const envelope = JSON.parse(res.body) as { query_id: string; status: object };
    expect(envelope.status).toEqual({
      reason: expect.stringContaining('worker') as string,
      sql_state: '58000',
      vendor_code: -110,
    });
    expect(await queryInfo(envelope.query_id, bearer)).toMatchObject({
      state: 'failed',
      status: { vendor_code: -110 },
    });
    // The new worker takes new work but not the dead one's statement.
    await startWorker();
    const after = await execute('select 1 as ok', bearer);
    expect(after.status).toBe(200);
    expect(await backends(marker)).toBe(0);
  }, 90_000);

  it('ends the fetch of a kept result whose worker is killed: 503 WORKER_LOST within 15 s, the query failed', async () => {
    const bearer = await token();
    const marker = `kill_kept_${randomBytes(3).toString('hex')}`;
    const [worker] = liveWorkers();
    expect(liveWorkers()).toHaveLength(1);
    const headers = { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' };
    const accepted = await fetch(`${baseUrl}/v1/execute`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ statement: `select pg_sleep(60), '${marker}'`, wait_timeout: 0 }),
    });
    expect(accepted.status).toBe(202);
    const { query_id: queryId } = (await accepted.json()) as { query_id: string };
    await until(async () => (await backends(marker)) === 1, 10_000);
    // The fetch waits for the result; its worker dies meanwhile, with none left to notice.
    const fetching = fetch(`${baseUrl}/v1/queries/${queryId}/result`, { headers });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const killedAt = Date.now();
    await worker.stop('SIGKILL');
    const res = await fetching;
    expect(Date.now() - killedAt).toBeLessThan(15_000);
    expect(res.status).toBe(503);
    expect(((await res.json()) as { status: object }).status).toMatchObject({
      sql_state: '58000',
      vendor_code: -110,
    });
    expect(await queryInfo(queryId, bearer)).toMatchObject({
      state: 'failed',
      status: { vendor_code: -110 },
    });
    await startWorker();
  }, 90_000);

  it('answers the fetch of a kept result whose worker died mid-result with 503 WORKER_LOST, never its rows as if whole, and gives its bytes back', async () => {
    const bearer = await token();
    const worker = await onlyWorker();
    const headers = { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' };
    const accepted = await fetch(`${baseUrl}/v1/execute`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        // Chunks of 500 rows are written, then the statement sleeps mid-result.
        statement: `select g, repeat('z', 1000) as z, pg_sleep(case when g = 2000 then 60 else 0 end)
                      from generate_series(1, 3000) g`,
        fetch_size: 500,
        wait_timeout: 0,
      }),
    });
    expect(accepted.status).toBe(202);
    const { query_id: queryId } = (await accepted.json()) as { query_id: string };
    const redis = new Redis({ port: redisPort, maxRetriesPerRequest: 1 });
    const held = () => redis.hget(new RedisKeys(env.SLUICE_KEY_PREFIX).keptHeld, queryId);
    try {
      await until(async () => Number(await held()) > 0, 15_000);
      await worker.stop('SIGKILL');
      // The first fetch streams what was made, and finds the worker gone.
      const first = await fetch(`${baseUrl}/v1/queries/${queryId}/result`, { headers });
      await first.text().catch(() => undefined);
      expect(await queryInfo(queryId, bearer)).toMatchObject({
        state: 'failed',
        status: { vendor_code: -110 },
      });
      // Then, as for any kept result that failed: its error, whole or resumed.
      for (const range of ['bytes=10-', undefined]) {
        const res = await fetch(`${baseUrl}/v1/queries/${queryId}/result`, {
          headers: { ...headers, ...(range ? { range } : {}) },
        });
        const text = await res.text().catch(() => 'the body was cut');
        expect({ range, status: res.status }).toEqual({ range, status: 503 });
        expect(JSON.parse(text)).toMatchObject({
          status: { sql_state: '58000', vendor_code: -110 },
        });
      }
      expect(await held()).toBeNull();
    } finally {
      redis.disconnect();
      await startWorker();
    }
  }, 90_000);

  it('gives back the bytes of a resumable result whose worker died while its response streamed', async () => {
    const bearer = await token();
    const worker = await onlyWorker();
    const redis = new Redis({ port: redisPort, maxRetriesPerRequest: 1 });
    let queryId = '';
    const held = () => redis.hget(new RedisKeys(env.SLUICE_KEY_PREFIX).keptHeld, queryId);
    try {
      const res = await fetch(`${baseUrl}/v1/execute`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          statement: `select g, repeat('z', 1000) as z, pg_sleep(case when g = 2000 then 60 else 0 end)
                        from generate_series(1, 3000) g`,
          fetch_size: 500,
          resumable: true,
        }),
      });
      expect(res.status).toBe(200);
      queryId = res.headers.get('x-query-id')!;
      let text = '';
      const decoder = new TextDecoder();
      const body = (async () => {
        for await (const chunk of res.body!) text += decoder.decode(chunk as Uint8Array);
      })();
      await until(async () => Number(await held()) > 0, 15_000);
      await worker.stop('SIGKILL');
      // The response ends with the error, or is cut: either way never as if whole.
      await body.catch(() => undefined);
      expect(text).not.toMatch(/"vendor_code":0/);
      // Failed: it keeps only its error, and its bytes are no longer counted.
      await until(async () => (await held()) === null, 15_000);
      const again = await fetch(`${baseUrl}/v1/queries/${queryId}/result`, {
        headers: { authorization: `Bearer ${bearer}` },
      });
      expect(again.status).toBe(503);
    } finally {
      redis.disconnect();
      await startWorker();
    }
  }, 90_000);

  it('ends the fetch of a kept query still queued when the last worker dies: 503 within seconds, not the queue-wait limit', async () => {
    const bearer = await token();
    const marker = `queued_kept_${randomBytes(3).toString('hex')}`;
    const [worker] = liveWorkers();
    const headers = { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' };
    const submit = async () => {
      const res = await fetch(`${baseUrl}/v1/execute`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ statement: `select pg_sleep(60), '${marker}'`, wait_timeout: 0 }),
      });
      expect(res.status).toBe(202);
      return ((await res.json()) as { query_id: string }).query_id;
    };
    // Fill the worker until a query waits in the queue. Its record says queued also while the
    // worker holds its job for a moment (to put it off past its user's share, or before a slot
    // is free): only a job in the queue itself (a queue_position) is not the worker's, and only
    // while the worker is frozen does it stay so until the kill.
    let queued: string | undefined;
    for (let i = 0; i < 12 && !queued; i++) {
      const queryId = await submit();
      await new Promise((resolve) => setTimeout(resolve, 300));
      worker.child.kill('SIGSTOP');
      // A failed look must not leave the worker frozen for the tests after this one.
      const info = await queryInfo(queryId, bearer).catch((err: unknown) => {
        worker.child.kill('SIGCONT');
        throw err;
      });
      if (info.state === 'queued' && info.queue_position !== null) queued = queryId;
      else worker.child.kill('SIGCONT');
    }
    expect(queued).toBeDefined();
    await worker.stop('SIGKILL');
    await forgetKilledWorkers();
    const asked = Date.now();
    const res = await fetch(`${baseUrl}/v1/queries/${queued}/result`, { headers });
    // SLUICE_MAX_QUEUE_WAIT_MS is 30 s here: the fetch does not wait for it.
    expect(Date.now() - asked).toBeLessThan(5_000);
    // As a new query would be answered with no worker alive.
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(((await res.json()) as { status: object }).status).toMatchObject({
      sql_state: '57P03',
      vendor_code: -109,
      reason: expect.stringContaining('no worker is available') as string,
    });
    expect(await queryInfo(queued!, bearer)).toMatchObject({
      state: 'failed',
      status: { vendor_code: -109 },
    });
    await startWorker();
  }, 90_000);

  it('answers 503 at once with Retry-After while no worker is alive, and serves again once one starts', async () => {
    const bearer = await token();
    await forgetKilledWorkers();
    // Stopped workers delete their heartbeat: readiness says so at once.
    await Promise.all(liveWorkers().map((w) => w.stop('SIGTERM')));
    const ready = await fetch(`${baseUrl}/health/ready`);
    expect(ready.status).toBe(503);
    expect(await ready.text()).toContain('no worker seen');
    const started = Date.now();
    const res = await execute('select 1', bearer);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toMatch(/^\d+$/);
    expect(JSON.parse(res.body)).toEqual({
      status: {
        reason: expect.stringContaining('no worker is available') as string,
        sql_state: '57P03',
        vendor_code: -109,
      },
    });
    await startWorker();
    const again = await execute('select 42 as answer', bearer);
    expect(again.status).toBe(200);
    expect(again.body).toContain('[[42]]');
  }, 60_000);

  it('never takes a busy, silent worker for a dead one: a statement quiet for two lock durations succeeds', async () => {
    const bearer = await token();
    expect(liveWorkers()).toHaveLength(1);
    // The worker's BullMQ lock lives JOB_LOCK_MS; the api checks a silent stream every second here.
    const quietSeconds = (2 * JOB_LOCK_MS) / 1000 + 1;
    const res = await execute(`select pg_sleep(${quietSeconds}), 5 as five`, bearer);
    expect(res.status).toBe(200);
    const body = JSON.parse(res.body) as { data: unknown[][]; status: { sql_state: string } };
    expect(body.data).toHaveLength(1);
    expect(body.data[0][1]).toBe(5);
    expect(body.status.sql_state).toBe('00000');
  }, 60_000);

  it('cancels the statement when the api reading it is killed', async () => {
    const bearer = await token();
    const marker = `kill_api_${randomBytes(3).toString('hex')}`;
    void execute(`select pg_sleep(60), '${marker}'`, bearer).catch(() => undefined);
    await until(async () => (await backends(marker)) === 1, 10_000);
    const api = processes.find((p) => p.child.spawnargs.join(' ').includes('/api/') && alive(p))!;
    await api.stop('SIGKILL');
    // The api's alive key expires within three beats; the worker then cancels the statement.
    const took = await until(async () => (await backends(marker)) === 0, 15_000);
    expect(took).toBeLessThan(15_000);
    const restarted = start('api');
    await waitForApi(baseUrl, restarted);
  }, 60_000);

  it('never runs a queued statement once the api that waited for it is killed', async () => {
    const bearer = await token();
    const table = `faults_queued_${randomBytes(3).toString('hex')}`;
    await until(() => Promise.resolve(liveWorkers().some(workerStarted)), 30_000);
    expect((await execute(`create table ${table} (note text)`, bearer)).status).toBe(200);
    try {
      const marker = `queued_hog_${randomBytes(3).toString('hex')}`;
      // Every slot of the worker's a user alone may take (3 of 4) is taken: the insert waits.
      const hogs = [1, 2, 3].map(() =>
        execute(`select pg_sleep(10), '${marker}'`, bearer).catch(() => undefined),
      );
      await until(async () => (await backends(marker)) === 3, 10_000);
      const insert = execute(`insert into ${table} values ('after its api died')`, bearer).catch(
        () => undefined,
      );
      await new Promise((resolve) => setTimeout(resolve, 500));
      const api = processes.find((p) => p.child.spawnargs.join(' ').includes('/api/') && alive(p))!;
      await api.stop('SIGKILL');
      await Promise.all([...hogs, insert]);
      // The hogs are cancelled once the api's alive keys lapse; then the insert's turn comes.
      await until(async () => (await backends(marker)) === 0, 15_000);
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      const { rows } = await db.query<{ n: number }>(`select count(*)::int as n from ${table}`);
      expect(rows[0].n).toBe(0);
    } finally {
      const restarted = start('api');
      await waitForApi(baseUrl, restarted);
      await execute(`drop table ${table}`, await token());
    }
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
      // docs/api.md, Response headers: every 503 of /v1/execute says when to try again.
      expect(JSON.parse(res.body).status.vendor_code).toBe(-206);
      expect(res.headers['retry-after']).toMatch(/^\d+$/);
    } finally {
      await postgres.start();
    }
    await until(async () => (await execute('select 1 as one', bearer)).status === 200, 20_000);
  }, 60_000);

  it('lets a worker finish its running query on SIGTERM, then exit; another takes new work', async () => {
    const bearer = await token();
    const [worker] = liveWorkers();
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

  it('ends a statement that catches its cancel when a worker outlives its grace period on SIGTERM', async () => {
    const bearer = await token();
    const graceMs = 1_500;
    const worker = startProcess('worker', { ...env, SLUICE_SHUTDOWN_GRACE_MS: String(graceMs) });
    processes.push(worker);
    await until(() => Promise.resolve(workerStarted(worker)), 30_000);
    // Only this worker may take the statement.
    await Promise.all(
      liveWorkers()
        .filter((w) => w !== worker)
        .map((w) => w.stop('SIGTERM')),
    );
    const marker = `trap_${randomBytes(3).toString('hex')}`;
    const asked = Date.now();
    const pending = execute(
      `do $$ begin /* ${marker} */ for i in 1..60 loop
         begin perform pg_sleep(1); exception when query_canceled then null; end;
       end loop; end $$`,
      bearer,
    );
    /** Sessions running the block, under any application_name; or only those in its sleep. */
    const sessions = async (sleeping: boolean) => {
      const { rows } = await db.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity
          where query like $1 and pid <> pg_backend_pid() and (not $2 or wait_event = 'PgSleep')`,
        [`%${marker}%`, sleeping],
      );
      return rows[0].n;
    };
    // A cancel that lands before the block's handler is set up is not caught: wait for its sleep.
    await until(async () => (await sessions(true)) === 1, 10_000);

    const signalled = Date.now();
    const code = await worker.stop('SIGTERM');
    const exitedAfter = Date.now() - signalled;
    // Nest closes the modules on SIGTERM, then raises it again: SIGTERM, not stop()'s SIGKILL.
    expect(code ?? worker.child.signalCode).toBe('SIGTERM');
    // The grace period, then the cancel and, 2 s after it, the end of the session.
    expect(exitedAfter).toBeGreaterThanOrEqual(graceMs);
    expect(exitedAfter).toBeLessThan(graceMs + 6_000);
    await until(async () => (await sessions(false)) === 0, 5_000);
    // Cancelled, as docs/architecture.md says of a shutdown past its grace: 409 in the envelope.
    const res = await pending;
    expect(Date.now() - asked).toBeLessThan(30_000);
    expect(res.status).toBe(409);
    expect(JSON.parse(res.body)).toEqual({
      query_id: expect.any(String),
      status: { reason: expect.any(String), sql_state: '57014', vendor_code: -900 },
    });
    await startWorker();
  }, 60_000);

  it("never sends a chunk twice when a worker's connection to Redis is cut between a write and its reply", async () => {
    const bearer = await token();
    // Only a worker whose Redis goes through a proxy that loses one reply may take the query.
    const redisProxy = new TcpProxy(await freePort(), redisPort);
    await redisProxy.start();
    const worker = startProcess('worker', {
      ...env,
      REDIS_URL: `redis://127.0.0.1:${redisProxy.port}`,
    });
    processes.push(worker);
    try {
      await until(() => Promise.resolve(workerStarted(worker)), 30_000);
      await Promise.all(
        liveWorkers()
          .filter((w) => w !== worker)
          .map((w) => w.stop('SIGTERM')),
      );
      // The reply to the third chunk's append (the append script's call, with its entry's
      // fields: …, k, data) is lost, after Redis wrote it.
      let appends = 0;
      const lost = redisProxy.loseReplyTo(
        (sent) => sent.includes('\r\n$1\r\nk\r\n$4\r\ndata\r\n') && ++appends === 3,
      );
      const res = await execute('select g from generate_series(1, 5000) g', bearer, {
        fetchSize: 500,
      });
      await lost;
      expect(res.status).toBe(200);
      expect(res.complete).toBe(true);
      const body = JSON.parse(res.body) as { data: number[][]; status: { sql_state: string } };
      // Every row once, in order: a write sent again after the cut must not add its rows again.
      expect(body.data.map(([g]) => g)).toEqual(Array.from({ length: 5000 }, (_, i) => i + 1));
      expect(body.status.sql_state).toBe('00000');
    } finally {
      await worker.stop('SIGTERM');
      await redisProxy.stop();
      await startWorker();
    }
  }, 60_000);

  /**
   * Runs `work` against an api of its own whose Redis connections go through a proxy (the
   * api's env `extra` added), and stops both after.
   */
  async function withProxiedApi(
    extra: Record<string, string>,
    work: (url: string, redisProxy: TcpProxy) => Promise<void>,
  ): Promise<void> {
    const redisProxy = new TcpProxy(await freePort(), redisPort);
    await redisProxy.start();
    const port = await freePort();
    const api = startProcess('api', {
      ...env,
      ...extra,
      PORT: String(port),
      REDIS_URL: `redis://127.0.0.1:${redisProxy.port}`,
    });
    processes.push(api);
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitForApi(url, api);
      await work(url, redisProxy);
    } finally {
      await api.stop('SIGTERM');
      await redisProxy.stop();
    }
  }

  it("runs a request with an Idempotency-Key once when the reply to its key's claim is lost: never 410 for a statement that never ran", async () => {
    const bearer = await token();
    await withProxiedApi({}, async (url, redisProxy) => {
      const key = `lost-claim-${randomBytes(4).toString('hex')}`;
      const send = () =>
        fetch(`${url}/v1/execute`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${bearer}`,
            'content-type': 'application/json',
            'idempotency-key': key,
          },
          body: JSON.stringify({ statement: 'select 42 as answer' }),
        });
      // The claim of the key is the first command to name it: Redis runs it, its reply is lost.
      const lost = redisProxy.loseReplyTo((sent) => sent.includes(':idem:'));
      const first = await send();
      await lost;
      const firstBody = (await first.json()) as { query_id: string; data: unknown };
      expect(first.status).toBe(200);
      expect(firstBody.data).toEqual([[42]]);
      // The key stands for that query: a repeat is its result, not a second run nor a 410.
      const repeat = await send();
      expect(repeat.status).toBe(200);
      expect(((await repeat.json()) as { query_id: string }).query_id).toBe(firstBody.query_id);
    });
  }, 60_000);

  it('admits a query whose slot was taken but the reply lost: its own slot is not counted against it (no 429)', async () => {
    const bearer = await token();
    await withProxiedApi({ SLUICE_MAX_ACTIVE_PER_USER: '1' }, async (url, redisProxy) => {
      // The user's first query takes the one slot they have; Redis takes it, the reply is lost.
      const lost = redisProxy.loseReplyTo((sent) => sent.includes(`}:active`));
      const res = await fetch(`${url}/v1/execute`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
        body: JSON.stringify({ statement: 'select 7 as seven' }),
      });
      await lost;
      const body = (await res.json()) as { data?: unknown; status: object };
      expect({ status: res.status, body }).toMatchObject({
        status: 200,
        body: { data: [[7]] },
      });
    });
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
