import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Pool } from 'pg';
import { testDatabaseUrl as DATABASE_URL } from '../settings';
import { applicationNameOf, e2eEnv, until } from './support/client';
import { RedisClusterTopology, startRedisCluster } from '../support/redis-cluster';
import { redisCli } from '../support/redis-servers';
import { SentinelTopology, startSentinelTopology } from '../support/redis-sentinel';
import {
  ServiceProcess,
  freePort,
  startProcess,
  waitForApi,
  workerStarted,
} from './support/service';

/**
 * A Redis master dies under a streaming query, on a Redis Cluster (three masters, each with a
 * replica) and on a master watched by three Sentinels: the client gets an error status, never a
 * success nor a hang; readiness says so; new queries succeed once a replica is promoted, with no
 * restart of Sluice. Each deployment is the spec's own (Redis processes, api, worker), on loopback.
 */
const db = new Pool({ connectionString: DATABASE_URL, max: 2 });

afterAll(() => db.end());

interface Deployment {
  baseUrl: string;
  prefix: string;
  bearer: string;
  processes: ServiceProcess[];
}

async function deploy(redisEnv: Record<string, string>): Promise<Deployment> {
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const admin = {
    user: `failover_${randomBytes(3).toString('hex')}`,
    password: randomBytes(9).toString('base64url'),
  };
  const prefix = `failover-${randomBytes(3).toString('hex')}`;
  const env = {
    ...e2eEnv().local.env,
    ...redisEnv,
    SLUICE_JWT_SECRET: randomBytes(24).toString('hex'),
    SLUICE_ADMIN_USER: admin.user,
    SLUICE_ADMIN_PASSWORD: admin.password,
    SLUICE_KEY_PREFIX: prefix,
    SLUICE_WORKER_THREADS: '1',
    // The spread case keeps two dozen results of one user at once.
    SLUICE_MAX_ACTIVE_PER_USER: '64',
    SLUICE_PRODUCER_SILENCE_MS: '1000',
    SLUICE_WORKER_METRICS_PORT: '0',
    PORT: String(port),
    HOST: '127.0.0.1',
  };
  const api = startProcess('api', env);
  const worker = startProcess('worker', env);
  const processes = [api, worker];
  await waitForApi(baseUrl, api);
  await until(() => Promise.resolve(workerStarted(worker)), 30_000);
  const res = await fetch(`${baseUrl}/v1/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: admin.user, password: admin.password }),
  });
  const bearer = ((await res.json()) as { access_token: string }).access_token;
  return { baseUrl, prefix, bearer, processes };
}

async function undeploy(deployment: Deployment | undefined): Promise<void> {
  if (!deployment) return;
  await Promise.all(deployment.processes.map((p) => p.stop('SIGKILL')));
  await db.query('DELETE FROM sluice.users WHERE username like $1', ['failover\\_%']);
}

/** A stream+json request; calls onLine with each complete line; resolves when the body ends. */
function stream(
  deployment: Deployment,
  statement: string,
  onLine: (line: string) => void,
): Promise<{ status: number; lines: string[]; complete: boolean }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${deployment.baseUrl}/v1/execute`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/stream+json',
        authorization: `Bearer ${deployment.bearer}`,
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let rest = '';
      const lines: string[] = [];
      res.on('data', (chunk: Buffer) => {
        rest += chunk.toString();
        const parts = rest.split('\n');
        rest = parts.pop()!;
        for (const line of parts) {
          lines.push(line);
          onLine(line);
        }
      });
      const end = () => resolve({ status: res.statusCode ?? 0, lines, complete: res.complete });
      res.on('close', end);
      res.on('error', end);
    });
    req.end(JSON.stringify({ statement, fetch_size: 1 }));
  });
}

async function answer(deployment: Deployment): Promise<number> {
  const res = await fetch(`${deployment.baseUrl}/v1/execute`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${deployment.bearer}` },
    body: JSON.stringify({ statement: 'select 42 as answer' }),
    signal: AbortSignal.timeout(10_000),
  }).catch(() => undefined);
  if (res?.status !== 200) return res?.status ?? 0;
  return (await res.text()).includes('[[42]]') ? 200 : -1;
}

async function readiness(deployment: Deployment): Promise<number> {
  const res = await fetch(`${deployment.baseUrl}/health/ready`, {
    signal: AbortSignal.timeout(5_000),
  }).catch(() => undefined);
  return res?.status ?? 0;
}

/**
 * Sends a query until one succeeds, for at most `ms`; the statuses seen on the way. A failure
 * says what the Redis processes last logged.
 */
async function servedAgain(
  deployment: Deployment,
  ms: number,
  diagnose: () => Promise<string>,
): Promise<Set<number>> {
  const seen = new Set<number>();
  try {
    await until(async () => {
      const status = await answer(deployment);
      seen.add(status);
      return status === 200;
    }, ms);
  } catch (err) {
    const statuses = [...seen].join(', ');
    throw new Error(`${(err as Error).message}; answers: ${statuses}\n${await diagnose()}`, {
      cause: err,
    });
  }
  return seen;
}

/**
 * Kills every Redis node with `killAll` while a stream is in flight: the stream ends with an error
 * status, and a new request and readiness are answered 503 at once, not held until Redis is back.
 */
async function outage(deployment: Deployment, killAll: () => Promise<void>): Promise<void> {
  expect(await answer(deployment)).toBe(200);
  let killedAt = 0;
  let killing: Promise<void> | undefined;
  const statement = 'select g, pg_sleep(0.05) from generate_series(1, 300) g';
  const res = await stream(deployment, statement, (line) => {
    if (!killing && line.startsWith('{"data"')) {
      killing = killAll().then(() => {
        killedAt = Date.now();
      });
    }
  });
  await killing;
  expect(Date.now() - killedAt).toBeLessThan(10_000);
  expect(res.complete).toBe(true);
  expect(JSON.parse(res.lines.at(-1)!)).toMatchObject({
    status: { sql_state: '57P03', vendor_code: -109 },
  });
  const asked = Date.now();
  expect(await answer(deployment)).toBe(503);
  expect(Date.now() - asked).toBeLessThan(5_000);
  expect(await readiness(deployment)).toBe(503);
}

/**
 * Streams a slow result, kills the master that `masterOf` names once rows flow, and checks what
 * the client, readiness and the next queries see.
 */
async function killMasterDuringStream(
  deployment: Deployment,
  masterOf: (queryId: string) => Promise<number>,
  { kill, diagnose }: Pick<RedisClusterTopology, 'kill' | 'diagnose'>,
): Promise<void> {
  let queryId = '';
  let killed: Promise<number> | undefined;
  let killedAt = 0;
  let outage = 0;
  const res = await stream(
    deployment,
    'select g, pg_sleep(0.05) from generate_series(1, 300) g',
    (line) => {
      const parsed = JSON.parse(line) as { query_id?: string; data?: unknown };
      if (parsed.query_id) queryId = parsed.query_id;
      if (parsed.data && !killed) {
        killed = masterOf(queryId).then(async (port) => {
          await kill(port);
          killedAt = Date.now();
          outage = await readiness(deployment);
          return port;
        });
      }
    },
  );
  await killed;
  // Readiness reports the outage while the dead master's keys have no master.
  expect(outage).toBe(503);
  // Ended within bounds, with a failure status in-band as its last line: never as a success.
  expect(Date.now() - killedAt).toBeLessThan(20_000);
  expect(res.status).toBe(200);
  expect(res.complete).toBe(true);
  expect(JSON.parse(res.lines.at(-1)!)).toEqual({
    status: {
      reason: expect.stringContaining('result stream was lost') as string,
      sql_state: '57P03',
      vendor_code: -109,
    },
  });
  const rows = res.lines.filter((l) => l.startsWith('{"data"')).length;
  expect(rows).toBeLessThan(300);
  // Served again by the promoted replica, within 30 s of the kill, with no restart; meanwhile
  // a request is refused as unavailable (503), never answered as an internal error.
  const seen = await servedAgain(deployment, 30_000 - (Date.now() - killedAt), diagnose);
  expect([...seen].filter((s) => s !== 200 && s !== 503)).toEqual([]);
  // The statement did not run on to its end unread.
  await until(async () => {
    const { rows: backends } = await db.query(
      'select 1 from pg_stat_activity where application_name = $1',
      [applicationNameOf(queryId, e2eEnv().local.env.SLUICE_CREDENTIAL_KEY)],
    );
    return backends.length === 0;
  }, 15_000);
  expect(await readiness(deployment)).toBe(200);
  for (let i = 0; i < 5; i++) expect(await answer(deployment)).toBe(200);
}

describe('Redis Cluster failover', () => {
  let cluster: RedisClusterTopology;
  let deployment: Deployment | undefined;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1000 });
    deployment = await deploy(cluster.env);
  }, 120_000);

  afterAll(async () => {
    await undeploy(deployment);
    await cluster?.stop();
  });

  it('spreads the result streams of many queries over the masters', async () => {
    const d = deployment!;
    const ids = await Promise.all(
      Array.from({ length: 24 }, async (_, i) => {
        const res = await fetch(`${d.baseUrl}/v1/execute`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${d.bearer}` },
          body: JSON.stringify({ statement: `select ${i} as n`, wait_timeout: 0 }),
        });
        expect(res.status).toBe(202);
        return ((await res.json()) as { query_id: string }).query_id;
      }),
    );
    // Kept results stay in their streams: find each on the master that holds it.
    const holders = new Map<number, number>();
    await until(async () => {
      holders.clear();
      for (const port of await cluster.masters()) {
        const keys = (await redisCli(port, 'keys', `${d.prefix}:q:*:out`)).split('\n');
        const held = ids.filter((id) => keys.includes(`${d.prefix}:q:{${id}}:out`)).length;
        if (held > 0) holders.set(port, held);
      }
      return [...holders.values()].reduce((a, b) => a + b, 0) === ids.length;
    }, 20_000);
    expect(holders.size).toBeGreaterThanOrEqual(2);
  }, 60_000);

  it('ends a stream whose master dies with an error status, and serves new queries within 30 s', async () => {
    const d = deployment!;
    expect(await answer(d)).toBe(200);
    let killed: number | undefined;
    try {
      await killMasterDuringStream(
        d,
        async (id) => (killed = await cluster.masterOf(`${d.prefix}:q:{${id}}:out`)),
        cluster,
      );
    } finally {
      // Back as the replica of the master that took its place: the next case may kill that one.
      if (killed !== undefined) await cluster.revive(killed);
    }
  }, 90_000);

  it('serves new queries within 30 s when the master of the queue dies', async () => {
    const d = deployment!;
    // Every key of BullMQ's queues carries the deployment's tag: one slot, one master.
    const port = await cluster.masterOf(`{${d.prefix}}:execute`);
    await cluster.kill(port);
    try {
      const killedAt = Date.now();
      const seen = await servedAgain(d, 30_000, () => cluster.diagnose());
      expect(Date.now() - killedAt).toBeLessThan(30_000);
      expect([...seen].filter((s) => s !== 200 && s !== 503)).toEqual([]);
      for (let i = 0; i < 5; i++) expect(await answer(d)).toBe(200);
    } finally {
      await cluster.revive(port);
    }
  }, 60_000);

  // Last: the cluster does not come back.
  it('answers at once while every node is down, and ends a stream in flight with an error status', async () => {
    await outage(deployment!, () =>
      Promise.all(
        cluster.nodes.split(',').map((node) => cluster.kill(Number(node.split(':')[1]))),
      ).then(() => undefined),
    );
  }, 60_000);
});

describe('Redis Sentinel failover', () => {
  let sentinel: SentinelTopology;
  let deployment: Deployment | undefined;

  beforeAll(async () => {
    sentinel = await startSentinelTopology();
    deployment = await deploy(sentinel.env);
  }, 120_000);

  afterAll(async () => {
    await undeploy(deployment);
    await sentinel?.stop();
  });

  it('ends a stream whose master dies with an error status, and serves new queries within 30 s', async () => {
    const d = deployment!;
    expect(await answer(d)).toBe(200);
    await killMasterDuringStream(d, () => sentinel.masterPort(), sentinel);
  }, 90_000);

  // Last, after the first failover: the master left has no replica, and nothing comes back.
  it('answers at once while the master and its replica are down, and ends a stream in flight', async () => {
    // Both data nodes, whichever is master now (the Sentinels' answer can lag): the one the
    // first case killed refuses the second kill, and that is fine.
    await outage(deployment!, async () => {
      await Promise.all(
        sentinel.dataPorts.map((port) => sentinel.kill(port).catch(() => undefined)),
      );
    });
  }, 60_000);
});
