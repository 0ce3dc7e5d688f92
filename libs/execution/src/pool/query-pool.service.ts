import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { randomFill } from 'node:crypto';
import { join } from 'node:path';
import { Piscina } from 'piscina';
import type { MessagePort, ResourceLimits } from 'node:worker_threads';
import { ExecuteJobData, LANES, Lane } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig, laneThreads, poolLanes } from '@app/config';
import type { PgLogin } from '@app/access';
import { SharedKeptTotal } from '@app/transport';
import type { ExecuteTask, TaskTrace } from '../tasks/execute-query.task';
import { ExecutionOutcome } from '../tasks/query.runner';
import { ThreadSettings } from '../tasks/thread.settings';

/**
 * A pool thread's heap limits: its young generation at `youngGenerationMb` (0: V8's own, which
 * let the thread of one large export hold 32 MB of it, all resident).
 */
export function threadResourceLimits(youngGenerationMb: number): ResourceLimits {
  return youngGenerationMb > 0 ? { maxYoungGenerationSizeMb: youngGenerationMb } : {};
}

/**
 * The piscina pools of threads that run statements and encode their results: one per lane the
 * process serves. Beside an interactive pool, the export pool's threads are its own and run at
 * nice SLUICE_EXPORT_WORKER_NICE, so export work neither takes an interactive thread nor, on the
 * same cores, the CPU interactive work is waiting for.
 */
@Injectable()
export class QueryPoolService implements OnApplicationShutdown {
  private readonly logger = new Logger(QueryPoolService.name);
  private readonly pools = new Map<Lane, Piscina<ExecuteTask, ExecutionOutcome>>();
  private readonly threads: Record<Lane, number>;
  private readonly connectionCounts = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
  /** Full collections the threads ran once idle after large results (IdleCollection). */
  private readonly idleCollections = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
  /** When an interactive statement last started, in any thread: exports give way after it. */
  private readonly lastInteractive = new SharedArrayBuffer(BigInt64Array.BYTES_PER_ELEMENT);
  /** Bytes all kept results hold, shared with standalone's in-process result channel. */
  readonly keptBytes = SharedKeptTotal.buffer();
  /** Kept results whose body the spool refused to take, since start. */
  private spoolWriteErrors = 0;

  constructor(@Inject(SLUICE_CONFIG) private readonly config: SluiceConfig) {
    this.threads = laneThreads({
      workerThreads: config.workerThreads,
      interactiveReserve: config.interactiveReserve,
      lanes: poolLanes(config),
    });
    const settings: ThreadSettings = {
      databaseUrl: config.databaseUrl!,
      ownLogins: ownLoginsOf(config),
      redis: config.redis,
      keyPrefix: config.keyPrefix,
      spool: config.spool,
      pgPoolSize: config.pgPoolSize,
      pgMaxConnectionsPerThread: this.pgMaxConnections / this.totalThreads,
      credentialKey: config.credentialKey!,
      connectionCounts: this.connectionCounts,
      idleCollections: this.idleCollections,
      defaultFetchSize: config.defaultFetchSize,
      windowChunks: config.windowChunks,
      windowBytes: config.windowBytes,
      maxEntryBytes: config.maxEntryBytes,
      streamTtlSeconds: config.streamTtlSeconds,
      jobRetentionSeconds: config.jobRetentionSeconds,
      pgConnectTimeoutMs: config.pgConnectTimeoutMs,
      clientIdleTimeoutMs: config.clientIdleTimeoutMs,
      cancelPollMs: config.cancelPollMs,
      nice: 0,
      lastInteractive: this.lastInteractive,
      keptBytes: this.keptBytes,
      exportYieldMs: config.exportYieldMs,
    };
    // libuv's own thread pool (zlib, crypto, dns) is made by the first thread that needs it and
    // inherits that thread's priority: made now, from this thread, never from a niced one.
    randomFill(Buffer.alloc(1), () => undefined);
    for (const lane of LANES) {
      const threads = this.threads[lane];
      if (!threads) continue;
      const nice = lane === 'export' ? config.exportWorkerNice : 0;
      this.pools.set(
        lane,
        new Piscina({
          filename: join(__dirname, '..', 'tasks', 'execute-query.task.js'),
          minThreads: threads,
          maxThreads: threads,
          concurrentTasksPerWorker: config.tasksPerThread,
          idleTimeout: Number.POSITIVE_INFINITY,
          resourceLimits: threadResourceLimits(config.threadYoungGenerationMb),
          // Tasks wait on timers and sockets between chunks: a thread must never block in
          // Atomics.wait ('sync', the default) while its tasks are in flight.
          atomics: 'async',
          workerData: { ...settings, nice } satisfies ThreadSettings,
        }),
      );
    }
  }

  private get totalThreads(): number {
    return this.threads.interactive + this.threads.export;
  }

  /** The cap on statement connections, shared out evenly between all the threads. */
  get pgMaxConnections(): number {
    return Math.floor(this.config.pgMaxConnections / this.totalThreads) * this.totalThreads;
  }

  /** Statement connections to PostgreSQL open in all threads now. */
  get pgConnections(): number {
    return Atomics.load(new Int32Array(this.connectionCounts), 0);
  }

  /** How many jobs of `lane` the pool runs at once (all lanes together if none is named). */
  capacity(lane?: Lane): number {
    const threads = lane ? this.threads[lane] : this.totalThreads;
    return threads * this.config.tasksPerThread;
  }

  /** The pools' own figures, for metrics: busy share of thread time, tasks waiting, threads, tasks done. */
  get stats(): {
    utilization: number;
    queueSize: number;
    threads: number;
    completed: number;
    spoolWriteErrors: number;
    idleCollections: number;
  } {
    let busy = 0;
    let queueSize = 0;
    let threads = 0;
    let completed = 0;
    for (const pool of this.pools.values()) {
      busy += pool.utilization * pool.threads.length;
      queueSize += pool.queueSize;
      threads += pool.threads.length;
      completed += pool.completed;
    }
    return {
      utilization: threads ? busy / threads : 0,
      queueSize,
      threads,
      completed,
      spoolWriteErrors: this.spoolWriteErrors,
      idleCollections: Atomics.load(new Int32Array(this.idleCollections), 0),
    };
  }

  /**
   * Runs a job in a thread of its lane's pool; with a port, its records go there instead of to
   * Redis. Without a login, the thread uses the login role Sluice provisions for the job's role
   * (service users).
   */
  run(
    job: ExecuteJobData,
    options: {
      port?: MessagePort;
      login?: PgLogin;
      ownerKept?: SharedArrayBuffer;
      trace?: TaskTrace;
    } = {},
  ): Promise<ExecutionOutcome> {
    const pool = this.pools.get(job.lane);
    if (!pool) return Promise.reject(new Error(`this process serves no ${job.lane} lane`));
    const { port, login, ownerKept, trace } = options;
    const ran = port
      ? pool.run({ job, port, login, ownerKept, trace }, { transferList: [port] as never })
      : pool.run({ job, login, trace });
    return ran.then((outcome) => {
      if (outcome?.spoolWriteFailed) this.spoolWriteErrors++;
      return outcome;
    });
  }

  /** Start-up check: a thread of each pool answers and reaches PostgreSQL. */
  async check(): Promise<void> {
    for (const [lane, pool] of this.pools) {
      const version = await (pool.run(undefined as never, {
        name: 'ping',
      }) as unknown as Promise<string>);
      const nice = lane === 'export' && this.config.exportWorkerNice;
      const threads = `${this.threads[lane]} thread${this.threads[lane] === 1 ? '' : 's'}`;
      this.logger.log(
        `${lane} pool of ${threads}${nice ? ` at nice ${nice}` : ''} ready (${version.split(',')[0]})`,
      );
    }
  }

  /**
   * Last phase of shutdown: whoever runs tasks (the worker's processor, standalone's executor)
   * drains them in onModuleDestroy, and Nest's module order must not decide which comes first —
   * standalone's executor sits in a global module, destroyed after this one.
   */
  async onApplicationShutdown(): Promise<void> {
    await Promise.all([...this.pools.values()].map((pool) => pool.destroy()));
  }
}

/** The users DATABASE_URL and SLUICE_METADATA_DATABASE_URL log in as (ThreadSettings.ownLogins). */
export function ownLoginsOf(
  config: Pick<SluiceConfig, 'databaseUrl' | 'metadataDatabaseUrl'>,
): string[] {
  const users = [config.databaseUrl, config.metadataDatabaseUrl]
    .filter((url): url is string => url !== undefined)
    .map((url) => decodeURIComponent(new URL(url).username))
    .filter((user) => user !== '');
  return [...new Set(users)];
}
