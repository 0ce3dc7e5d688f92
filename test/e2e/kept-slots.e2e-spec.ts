import { randomBytes } from 'node:crypto';
import Redis from 'ioredis';
import { e2eEnv, eventually } from './support/client';
import { ServiceProcess, freePort, startProcess, waitForApi } from './support/service';

/**
 * A query holds its user's slot (SLUICE_MAX_ACTIVE_PER_USER) until it ends, whoever waits for it:
 * a detached query still queued, one whose api was restarted, a resumable one whose client left.
 * A deployment of its own (an api and a worker with one slot, on the suite's Redis under a prefix
 * of its own) whose slot lease is 1 s, so that waiting several leases takes seconds.
 */
const LEASE_MS = 1_000;
const admin = { user: `kslots_${randomBytes(3).toString('hex')}`, password: 'kept-slots-pw' };
const keyPrefix = `kslots-${randomBytes(3).toString('hex')}`;
const processes: ServiceProcess[] = [];
let env: Record<string, string>;
let baseUrl: string;
let token: string;

interface Answer {
  status: number;
  json: { query_id?: string; state?: string; status?: { vendor_code: number } };
}

async function call(method: string, path: string, body?: object): Promise<Answer> {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, json: (await res.json()) as Answer['json'] };
}

/** A detached query (202 at once) of `seconds` of sleep; its id. */
async function detached(seconds: number): Promise<string> {
  const res = await call('POST', '/v1/execute', {
    statement: `select pg_sleep(${seconds})`,
    wait_timeout: 0,
  });
  expect(res.status).toBe(202);
  return res.json.query_id!;
}

async function stateOf(queryId: string): Promise<string | undefined> {
  return (await call('GET', `/v1/queries/${queryId}`)).json.state;
}

/** Waits until the queries are in these states (the first running, the second queued). */
async function settled(running: string, queued: string): Promise<void> {
  await eventually(async () =>
    (await stateOf(running)) === 'running' && (await stateOf(queued)) === 'queued'
      ? true
      : undefined,
  );
}

/** Past several leases, a third query is still refused: both slots are held. */
async function expectSlotsHeld(): Promise<void> {
  await new Promise((r) => setTimeout(r, 4 * LEASE_MS));
  const third = await call('POST', '/v1/execute', { statement: 'select 1' });
  expect(third.status).toBe(429);
  expect(third.json.status).toMatchObject({ vendor_code: -108 });
}

/** Cancels the queries; then the user's slots are free again. */
async function endAll(ids: string[]): Promise<void> {
  for (const id of ids) await call('DELETE', `/v1/queries/${id}`);
  await eventually(async () => {
    const res = await call('POST', '/v1/execute', { statement: 'select 1' });
    return res.status === 200 ? true : undefined;
  }, 15_000);
}

async function startApi(): Promise<ServiceProcess> {
  const api = startProcess('api', env);
  processes.push(api);
  await waitForApi(baseUrl, api, 60_000);
  return api;
}

beforeAll(async () => {
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  env = {
    ...e2eEnv().local.env,
    ...e2eEnv().redisEnv,
    SLUICE_JWT_SECRET: randomBytes(24).toString('hex'),
    SLUICE_ADMIN_USER: admin.user,
    SLUICE_ADMIN_PASSWORD: admin.password,
    SLUICE_KEY_PREFIX: keyPrefix,
    SLUICE_SLOT_LEASE_MS: String(LEASE_MS),
    SLUICE_MAX_ACTIVE_PER_USER: '2',
    SLUICE_MAX_QUEUE_WAIT_MS: '60000',
    // One statement at a time: the second waits in the queue.
    SLUICE_WORKER_THREADS: '1',
    SLUICE_TASKS_PER_THREAD: '1',
    SLUICE_WORKER_METRICS_PORT: '0',
    PORT: String(port),
    HOST: '127.0.0.1',
  };
  processes.push(startProcess('worker', env));
  await startApi();
  const login = await fetch(`${baseUrl}/v1/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: admin.user, password: admin.password }),
  });
  token = ((await login.json()) as { access_token: string }).access_token;
}, 90_000);

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop('SIGKILL')));
  const redis = new Redis(e2eEnv().redisUrl);
  try {
    for (const pattern of [`${keyPrefix}:*`, `{${keyPrefix}}:*`]) {
      const keys = await redis.keys(pattern);
      if (keys.length > 0) await redis.unlink(...keys);
    }
  } finally {
    redis.disconnect();
  }
  const { Client } = await import('pg');
  const db = new Client({ connectionString: e2eEnv().local.superUrl });
  await db.connect();
  await db.query('DELETE FROM sluice.users WHERE username = $1', [admin.user]);
  await db.end();
});

describe("a query holds its user's slot until it ends, whoever waits for it", () => {
  it('a detached query still queued, beside one running, past several slot leases', async () => {
    const running = await detached(30);
    const queued = await detached(30);
    await settled(running, queued);
    await expectSlotsHeld();
    expect(await stateOf(queued)).toBe('queued');
    await endAll([running, queued]);
  }, 60_000);

  it('detached queries whose api was killed and started again', async () => {
    const running = await detached(30);
    const queued = await detached(30);
    await settled(running, queued);
    const [api] = processes.splice(1, 1);
    await api.stop('SIGKILL');
    await startApi();
    await expectSlotsHeld();
    await endAll([running, queued]);
  }, 90_000);

  it('a resumable query whose client left, beside a detached one still queued', async () => {
    const leaving = new AbortController();
    const resumable = fetch(`${baseUrl}/v1/execute`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ statement: 'select pg_sleep(30)', resumable: true }),
      signal: leaving.signal,
    }).catch(() => undefined);
    let running: string | undefined;
    await eventually(async () => {
      const list = await call('GET', '/v1/queries');
      const rows = list.json as unknown as { query_id: string; state: string }[];
      running = rows.find((q) => q.state === 'running')?.query_id;
      return running;
    });
    leaving.abort();
    await resumable;
    const queued = await detached(30);
    await settled(running!, queued);
    await expectSlotsHeld();
    expect(await stateOf(running!)).toBe('running');
    await endAll([running!, queued]);
  }, 60_000);
});
