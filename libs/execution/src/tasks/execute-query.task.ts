import Redis from 'ioredis';
import { workerData } from 'piscina';
import type { MessagePort } from 'node:worker_threads';
import { ExecuteJobData } from '@app/contracts';
import { LoginRoleProvisioner, type PgLogin } from '@app/access';
import {
  CappedResultWriter,
  FlowWindow,
  PortResultWriter,
  RedisKeys,
  RedisResultWriter,
  ResultWriter,
} from '@app/transport';
import { DatabaseRegistry } from './database.registry';
import { LoginPools } from './login.pools';
import { InteractiveClock, exportPace } from './export.pace';
import { ExecutionOutcome, QueryRunner } from './query.runner';
import { lowerThreadPriority } from './thread.priority';
import { ThreadSettings } from './thread.settings';

// Piscina entry: one thread's connections are made once and shared by the tasks it runs.
const settings = workerData as ThreadSettings;
// An export thread beside interactive ones gives way to them (where the OS allows it).
if (settings.nice > 0) lowerThreadPriority(settings.nice);
const keys = new RedisKeys(settings.keyPrefix);
const counts = new Int32Array(settings.connectionCounts);
const databases = new DatabaseRegistry(settings.databaseUrl);
const logins = new LoginPools({
  baseUrl: settings.databaseUrl,
  poolSize: settings.pgPoolSize,
  maxConnections: settings.pgMaxConnectionsPerThread,
  idleTimeoutMs: 30_000,
  onCount: (delta) => Atomics.add(counts, 0, delta),
});
const provisioner = new LoginRoleProvisioner(settings.credentialKey);
const runner = new QueryRunner(databases, logins, provisioner, settings);
let redis: Redis | undefined;

function connection(): Redis {
  if (!redis) {
    redis = new Redis(settings.redisUrl!, { maxRetriesPerRequest: 3, enableAutoPipelining: true });
    // ioredis reconnects by itself; a write that fails meanwhile ends its query with the error.
    redis.on('error', () => undefined);
  }
  return redis;
}

/** One task: the job, and in standalone mode the port its records go to. */
export interface ExecuteTask {
  job: ExecuteJobData;
  port?: MessagePort;
  /** A database user's own login; absent: the login role provisioned for the job's role. */
  login?: PgLogin;
}

/** No reader holds a kept result back: its writer is bounded by bytes instead (CappedResultWriter). */
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

function writerFor(task: ExecuteTask): ResultWriter {
  const { retain, queryId } = task.job;
  const window: FlowWindow = {
    chunks: retain ? UNBOUNDED : settings.windowChunks,
    bytes: retain ? UNBOUNDED : settings.windowBytes,
    idleTimeoutMs: settings.clientIdleTimeoutMs,
  };
  const writer = task.port
    ? new PortResultWriter(task.port, window)
    : new RedisResultWriter(
        connection(),
        keys,
        queryId,
        window,
        retain ? retain.ttlSeconds : settings.streamTtlSeconds,
        settings.cancelPollMs,
        !retain,
      );
  return retain ? new CappedResultWriter(writer, retain.maxBytes) : writer;
}

const interactive = new InteractiveClock(settings.lastInteractive);
const exportGivesWay = exportPace(interactive, settings.exportYieldMs);

/** Runs one execution job and writes its result to the query's result channel. */
export default async function executeQuery(task: ExecuteTask): Promise<ExecutionOutcome> {
  const { job } = task;
  if (job.lane === 'export') return runner.run(job, writerFor(task), task.login, exportGivesWay);
  interactive.started();
  return runner.run(job, writerFor(task), task.login);
}

/** Start-up check: the thread loaded and reaches the default database. */
export async function ping(): Promise<string> {
  return databases.get(undefined).version();
}
