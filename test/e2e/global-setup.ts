import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { testDatabaseUrl as DATABASE_URL, testRedisUrl as REDIS_URL } from '../settings';
import { prepareServiceDatabase } from './support/roles';
import { startRedisCluster } from '../support/redis-cluster';
import { startSentinelTopology } from '../support/redis-sentinel';
import { startS3Server } from '../support/s3.server';
import {
  E2eEnvironment,
  ServiceProcess,
  freePort,
  startProcess,
  waitForApi,
} from './support/service';

declare global {
  var __SLUICE_E2E__:
    | {
        processes: ServiceProcess[];
        dataDir?: string;
        redis?: { stop(): Promise<void> };
        spool?: { stop(): Promise<void> };
      }
    | undefined;
}

/**
 * The spool the suite's processes write kept results to (SLUICE_E2E_SPOOL): none in cluster mode
 * by default (kept results in Redis, as without SLUICE_SPOOL_URL), a directory in standalone mode
 * (its default), or an S3-compatible server (s3rver) started here. With a spool, its caps are the
 * suite's kept-result caps (1 MiB a result, 2 MiB together), so that the same specs see them.
 */
async function startSpool(
  mode: 'cluster' | 'standalone',
  keyPrefix: string,
): Promise<{
  kind: E2eEnvironment['spool'];
  env: Record<string, string>;
  s3?: E2eEnvironment['s3'];
  stop?: () => Promise<void>;
}> {
  const kind = process.env.SLUICE_E2E_SPOOL ?? (mode === 'standalone' ? 'file' : 'redis');
  const caps = {
    SLUICE_SPOOL_MAX_BYTES: String(1024 * 1024),
    SLUICE_SPOOL_TOTAL_MAX_BYTES: String(2 * 1024 * 1024),
    // Small segments and short sweeps: results of a few KiB span several segments.
    SLUICE_SPOOL_SEGMENT_BYTES: String(64 * 1024),
    SLUICE_SPOOL_SWEEP_SECONDS: '2',
    SLUICE_SPOOL_ORPHAN_SECONDS: '3',
    // Only an S3 store signs URLs: the manifest of a file spool has none.
    SLUICE_SPOOL_PRESIGN_SECONDS: '60',
  };
  switch (kind) {
    case 'redis':
      if (mode === 'standalone') throw new Error('SLUICE_E2E_SPOOL=redis: cluster mode only');
      return { kind, env: {} };
    case 'file': {
      // Named, in standalone mode too (whose default is under its data directory): the specs
      // reach into it.
      const dir = mkdtempSync(join(tmpdir(), 'sluice-e2e-spool-'));
      return {
        kind,
        env: { ...caps, SLUICE_SPOOL_URL: pathToFileURL(dir).href },
        stop: () => Promise.resolve(rmSync(dir, { recursive: true, force: true })),
      };
    }
    case 's3': {
      const server = await startS3Server();
      return {
        kind,
        env: { ...caps, ...server.env(keyPrefix) },
        s3: { endpoint: server.endpoint, bucket: server.bucket, prefix: `${keyPrefix}/` },
        stop: () => server.stop(),
      };
    }
    default:
      throw new Error(`SLUICE_E2E_SPOOL: redis, file or s3, not ${kind}`);
  }
}

/** The Redis deployment the cluster-mode suite runs on (SLUICE_E2E_REDIS): its own, but one node. */
async function startRedis(): Promise<{
  kind: E2eEnvironment['redisKind'];
  env: Record<string, string>;
  stop?: () => Promise<void>;
}> {
  switch (process.env.SLUICE_E2E_REDIS ?? 'single') {
    case 'single':
      return { kind: 'single', env: { REDIS_URL } };
    case 'cluster': {
      const cluster = await startRedisCluster({ masters: 3 });
      return { kind: 'cluster', env: cluster.env, stop: () => cluster.stop() };
    }
    case 'sentinel': {
      const sentinel = await startSentinelTopology();
      return { kind: 'sentinel', env: sentinel.env, stop: () => sentinel.stop() };
    }
    default:
      throw new Error(
        `SLUICE_E2E_REDIS: single, cluster or sentinel, not ${process.env.SLUICE_E2E_REDIS}`,
      );
  }
}

const PG_MAX_CONNECTIONS = 6;

/**
 * Starts the service the way SLUICE_E2E_MODE says — `cluster`: api and worker as separate
 * processes on the local PostgreSQL and Redis; `standalone`: one process, no Redis, embedded
 * PostgreSQL — and tells the tests where it is through the env.
 */
export default async function globalSetup(): Promise<void> {
  const mode = process.env.SLUICE_E2E_MODE === 'standalone' ? 'standalone' : 'cluster';
  // The local PostgreSQL set up as production must be (no superuser login for Sluice): the
  // cluster suite runs on it, and specs that start deployments of their own use it in both modes.
  const local = await prepareServiceDatabase(DATABASE_URL);
  const port = await freePort();
  const port2 = await freePort();
  const base = {
    baseUrl: `http://127.0.0.1:${port}`,
    baseUrls: [`http://127.0.0.1:${port}`],
    capacity: 4,
    // Half of each worker's slots: 1 of 2 on each of the two workers, or 2 of standalone's 4.
    userSlots: 2,
    // Every slot but one of each worker's: 1 of 2 on each of the two, or 3 of standalone's 4.
    userSlotsAlone: mode === 'cluster' ? 2 : 3,
    redisUrl: REDIS_URL,
    keyPrefix: `sluice-e2e-${randomBytes(4).toString('hex')}`,
    adminUser: `e2e_admin_${randomBytes(3).toString('hex')}`,
    adminPassword: randomBytes(12).toString('base64url'),
    pgMaxConnections: PG_MAX_CONNECTIONS,
    slotLeaseMs: 5_000,
    poolMetricsUrls: [`http://127.0.0.1:${port}/metrics`],
  };
  const spool = await startSpool(mode, base.keyPrefix);
  const common = {
    ...spool.env,
    SLUICE_KEY_PREFIX: base.keyPrefix,
    SLUICE_ADMIN_USER: base.adminUser,
    SLUICE_ADMIN_PASSWORD: base.adminPassword,
    SLUICE_PRODUCER_SILENCE_MS: '3000',
    SLUICE_CLIENT_IDLE_TIMEOUT_MS: '3000',
    // slow-clients.e2e-spec: a request that takes longer to arrive is cut (408).
    SLUICE_REQUEST_TIMEOUT_MS: '6000',
    // slow-clients.e2e-spec: bodies past 4 MiB arriving at once are refused (503).
    SLUICE_MAX_RECEIVING_BYTES: String(4 * 1024 * 1024),
    // Kept results (async.e2e-spec): short-lived and small, so that the spec sees the three limits.
    SLUICE_RESULT_TTL_SECONDS: '8',
    SLUICE_RESULT_MAX_BYTES: String(1024 * 1024),
    SLUICE_RESULT_TOTAL_MAX_BYTES: String(2 * 1024 * 1024),
    SLUICE_MAX_ACTIVE_PER_USER: '6',
    SLUICE_MAX_QUEUE_WAIT_MS: '4000',
    // async.e2e-spec waits out one lease to see that kept queries still hold their slots.
    SLUICE_SLOT_LEASE_MS: String(base.slotLeaseMs),
    SLUICE_TASKS_PER_THREAD: '2',
    // Low, so that the suite's many roles keep every process at its cap of connections.
    SLUICE_PG_MAX_CONNECTIONS: String(PG_MAX_CONNECTIONS),
    PORT: String(port),
    HOST: '127.0.0.1',
  };
  let env: E2eEnvironment;
  let processes: ServiceProcess[];
  let dataDir: string | undefined;
  let redisStop: (() => Promise<void>) | undefined;
  if (mode === 'cluster') {
    const jwtSecret = randomBytes(24).toString('hex');
    const redis = await startRedis();
    redisStop = redis.stop;
    // Stopped by the teardown even if the processes below never start.
    globalThis.__SLUICE_E2E__ = {
      processes: [],
      redis: redisStop && { stop: redisStop },
      spool: spool.stop && { stop: spool.stop },
    };
    // Two api and two worker processes share one Redis: every test runs scaled out.
    const cluster = {
      ...common,
      ...local.env,
      ...redis.env,
      SLUICE_JWT_SECRET: jwtSecret,
      SLUICE_WORKER_THREADS: '1',
    };
    const metricsPorts = [await freePort(), await freePort()];
    processes = [
      startProcess('api', cluster),
      startProcess('api', { ...cluster, PORT: String(port2) }),
      ...metricsPorts.map((p) =>
        startProcess('worker', { ...cluster, SLUICE_WORKER_METRICS_PORT: String(p) }),
      ),
    ];
    base.poolMetricsUrls = metricsPorts.map((p) => `http://127.0.0.1:${p}/metrics`);
    env = {
      ...base,
      baseUrls: [base.baseUrl, `http://127.0.0.1:${port2}`],
      mode,
      redisKind: redis.kind,
      redisEnv: redis.env,
      jwtSecret,
      databaseUrl: DATABASE_URL,
      defaultDatabase: new URL(DATABASE_URL).pathname.slice(1),
      controlRole: local.controlRole,
      adminRole: local.adminRole,
      serviceEnv: { ...local.env, ...spool.env },
      local,
      spool: spool.kind,
      spoolEnv: spool.env,
      s3: spool.s3,
    };
  } else {
    dataDir = join(tmpdir(), `sluice-e2e-${randomBytes(4).toString('hex')}`);
    const pgPort = await freePort();
    processes = [
      startProcess('api', {
        ...common,
        SLUICE_DATA_DIR: dataDir,
        SLUICE_EMBEDDED_PG_PORT: String(pgPort),
      }),
    ];
    env = {
      ...base,
      mode,
      redisKind: 'single',
      redisEnv: { REDIS_URL },
      jwtSecret: '',
      databaseUrl: '',
      defaultDatabase: 'sluice_demo',
      controlRole: 'sluice_control',
      adminRole: 'sluice_admin',
      serviceEnv: {},
      local,
      spool: spool.kind,
      spoolEnv: spool.env,
      s3: spool.s3,
    };
    globalThis.__SLUICE_E2E__ = { processes, dataDir, spool: spool.stop && { stop: spool.stop } };
    await ready(env, processes);
    const state = JSON.parse(readFileSync(join(dataDir, 'standalone.json'), 'utf8')) as {
      jwtSecret: string;
      superuserPassword: string;
      controlPassword: string;
      credentialKey: string;
    };
    const at = `127.0.0.1:${pgPort}/sluice_demo`;
    env.jwtSecret = state.jwtSecret;
    env.databaseUrl = `postgresql://postgres:${state.superuserPassword}@${at}`;
    env.serviceEnv = {
      DATABASE_URL: `postgresql://sluice_control:${state.controlPassword}@${at}`,
      SLUICE_METADATA_DATABASE_URL: env.databaseUrl,
      SLUICE_CREDENTIAL_KEY: state.credentialKey,
      SLUICE_ADMIN_ROLE: 'sluice_admin',
      ...spool.env,
    };
  }
  globalThis.__SLUICE_E2E__ = {
    processes,
    dataDir,
    redis: redisStop && { stop: redisStop },
    spool: spool.stop && { stop: spool.stop },
  };
  // What the suite's processes print, for tests that assert what never reaches the logs.
  env.logFiles = processes.map((p, i) => {
    const file = join(tmpdir(), `${base.keyPrefix}-${i}.log`);
    writeFileSync(file, p.output());
    p.child.stdout?.on('data', (d: Buffer) => appendFileSync(file, d));
    p.child.stderr?.on('data', (d: Buffer) => appendFileSync(file, d));
    return file;
  });
  await ready(env, processes);
  process.env.SLUICE_E2E = JSON.stringify(env);
}

async function ready(env: E2eEnvironment, processes: ServiceProcess[]): Promise<void> {
  try {
    await Promise.all(env.baseUrls.map((url, i) => waitForApi(url, processes[i], 90_000)));
  } catch (err) {
    await Promise.all(processes.map((p) => p.stop()));
    const rest = processes.slice(1).map((p) => p.output());
    throw new Error(`${(err as Error).message}\n${rest.join('\n')}`, { cause: err });
  }
}
