import { workerData } from 'piscina';
import type { MessagePort } from 'node:worker_threads';
import { ExecuteJobData } from '@app/contracts';
import { LoginRoleProvisioner, type PgLogin } from '@app/access';
import {
  CappedResultWriter,
  FlowWindow,
  PortResultWriter,
  Produced,
  ProgressMessage,
  RedisClient,
  RedisConnector,
  RedisKeptLedger,
  RedisQueryRecords,
  RedisKeys,
  RedisResultWriter,
  ResultSpool,
  ResultWriter,
  SharedKeptTotal,
  SpoolingResultWriter,
  UnconfiguredSpool,
  openSpool,
} from '@app/transport';
import { DatabaseRegistry } from './database.registry';
import { LoginPools } from './login.pools';
import { InteractiveClock, exportPace } from './export.pace';
import { IdleCollection, exposedGc } from './idle.collection';
import { ExecutionOutcome, QueryRunner } from './query.runner';
import { ProgressThrottle } from './progress.throttle';
import { StatementClock } from './statement.clock';
import { lowerThreadPriority } from './thread.priority';
import { ThreadSettings } from './thread.settings';

// Piscina entry: one thread's connections are made once and shared by the tasks it runs.
const settings = workerData as ThreadSettings;
// An export thread beside interactive ones gives way to them (where the OS allows it).
if (settings.nice > 0) lowerThreadPriority(settings.nice);
const keys = new RedisKeys(settings.keyPrefix);
const keptTotal = new SharedKeptTotal(settings.keptBytes);
const counts = new Int32Array(settings.connectionCounts);
const databases = new DatabaseRegistry(settings.databaseUrl, settings.pgConnectTimeoutMs);
const logins = new LoginPools({
  baseUrl: settings.databaseUrl,
  connectTimeoutMs: settings.pgConnectTimeoutMs,
  poolSize: settings.pgPoolSize,
  maxConnections: settings.pgMaxConnectionsPerThread,
  idleTimeoutMs: 30_000,
  onCount: (delta) => Atomics.add(counts, 0, delta),
});
const provisioner = new LoginRoleProvisioner(settings.credentialKey);
const runner = new QueryRunner(databases, logins, provisioner, settings);
let redis: RedisClient | undefined;
let ledger: RedisKeptLedger | undefined;
let records: RedisQueryRecords | undefined;
let spool: ResultSpool | undefined;

/** Query records, on the thread's connection: progress reports, and ends with the last entry. */
function recordsOf(): RedisQueryRecords {
  records ??= new RedisQueryRecords(connection(), keys, settings.jobRetentionSeconds);
  return records;
}

function connection(): RedisClient {
  if (!redis) {
    redis = new RedisConnector(settings.redis!).connect({
      maxRetriesPerRequest: 3,
      enableAutoPipelining: true,
    });
    // ioredis reconnects by itself; a write that fails meanwhile ends its query with the error.
    redis.on('error', () => undefined);
  }
  return redis;
}

/**
 * The thread's spool, opened at first use. A job queued as spooled on a worker without
 * SLUICE_SPOOL_URL fails at its first segment with a status that says so (the api and the worker
 * must agree on the setting).
 */
function spoolOf(): ResultSpool {
  spool ??= settings.spool ? openSpool(settings.spool) : new UnconfiguredSpool();
  return spool;
}

/** One task: the job, and in standalone mode the port its records go to. */
export interface ExecuteTask {
  job: ExecuteJobData;
  port?: MessagePort;
  /** A database user's own login; absent: the login role provisioned for the job's role. */
  login?: PgLogin;
  /** With a port: the bytes the job's user's kept results hold (SharedKeptTotal's memory). */
  ownerKept?: SharedArrayBuffer;
  /** A traced job: its phases are measured, and its statement may carry the traceparent. */
  trace?: TaskTrace;
}

/** What a traced task is given: plain data, the statement span's traceparent for sqlcommenter. */
export interface TaskTrace {
  traceparent?: string;
}

/** No reader holds a kept result back: its writer is bounded by bytes instead (CappedResultWriter). */
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

function writerFor(task: ExecuteTask): ResultWriter {
  const { kept, queryId } = task.job;
  const window: FlowWindow = {
    chunks: kept ? UNBOUNDED : settings.windowChunks,
    bytes: kept ? UNBOUNDED : settings.windowBytes,
    idleTimeoutMs: settings.clientIdleTimeoutMs,
  };
  const writer = task.port
    ? new PortResultWriter(task.port, window)
    : new RedisResultWriter(connection(), keys, queryId, {
        window,
        ttlSeconds: kept ? kept.ttlSeconds : settings.streamTtlSeconds,
        pollMs: settings.cancelPollMs,
        kept: kept !== undefined,
        // A kept result's end stays with the worker's job lifecycle (its size and ledger rules).
        // The end with the last entry: no end without its entry, nor entry without its end.
        recordEnd: kept ? undefined : recordsOf().endRecorder(queryId),
      });
  if (!kept) return writer;
  const keeping = kept.spooled
    ? new SpoolingResultWriter(writer, spoolOf(), queryId, {
        segmentBytes: settings.spool?.segmentBytes ?? 0,
        sealMs: settings.spool?.sealMs ?? 0,
      })
    : writer;
  const cap = kept.totalMaxBytes;
  const caps = cap === undefined ? undefined : { total: cap, user: kept.userMaxBytes ?? cap };
  const budget =
    caps === undefined
      ? undefined
      : task.port
        ? keptTotal.budget(caps, new SharedKeptTotal(task.ownerKept ?? SharedKeptTotal.buffer()))
        : (ledger ??= new RedisKeptLedger(connection(), keys)).budget(
            { queryId, owner: task.job.username },
            { caps, ttlSeconds: kept.ttlSeconds },
          );
  return new CappedResultWriter(keeping, kept.maxBytes, budget);
}

/**
 * Where a running query's progress goes: in Redis, to its registry record; in-process, over its
 * port to the main thread.
 */
function progressOf(task: ExecuteTask): ProgressThrottle {
  const { port, job } = task;
  const report = port
    ? (produced: Produced) =>
        port.postMessage({ type: 'progress', ...produced } satisfies ProgressMessage)
    : (produced: Produced) =>
        void recordsOf()
          .progress(job.queryId, produced)
          // Progress is shown, not relied on: the next report (or the end) says it again.
          .catch(() => undefined);
  return new ProgressThrottle(report);
}

const interactive = new InteractiveClock(settings.lastInteractive);
const exportGivesWay = exportPace(interactive, settings.exportYieldMs);
const idle = new IdleCollection(countedGc(new Int32Array(settings.idleCollections)));

/** V8's full collection, each one counted in `count` for /metrics; undefined as exposedGc(). */
function countedGc(count: Int32Array): (() => void) | undefined {
  const gc = exposedGc();
  return (
    gc &&
    (() => {
      gc();
      Atomics.add(count, 0, 1);
    })
  );
}

/** Runs one execution job and writes its result to the query's result channel. */
export default async function executeQuery(task: ExecuteTask): Promise<ExecutionOutcome> {
  const { job } = task;
  const progress = progressOf(task);
  const writer = writerFor(task);
  const exporting = job.lane === 'export';
  if (!exporting) interactive.started();
  idle.started();
  let produced = 0;
  try {
    const outcome = await runner.run(job, writer, {
      login: task.login,
      pace: exporting ? exportGivesWay : undefined,
      progress,
      clock: task.trace ? new StatementClock() : undefined,
      traceparent: task.trace?.traceparent,
    });
    // Uncompressed: a compressed result's garbage is its rows' and their encoding's.
    produced = outcome.encodedBytes ?? outcome.bytes;
    // The run's own object: set, not spread with the field (V8's slow path for such a literal).
    if (writer.endRecorded) outcome.recorded = true;
    return outcome;
  } finally {
    idle.ended(produced);
  }
}

/** Start-up check: the thread loaded and reaches the default database. */
export async function ping(): Promise<string> {
  return databases.get(undefined).version();
}
