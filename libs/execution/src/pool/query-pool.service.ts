import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { join } from 'node:path';
import { Piscina } from 'piscina';
import type { MessagePort } from 'node:worker_threads';
import { ExecuteJobData } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import type { PgLogin } from '@app/access';
import type { ExecuteTask } from '../tasks/execute-query.task';
import { ExecutionOutcome } from '../tasks/query.runner';
import { ThreadSettings } from '../tasks/thread.settings';

/** The piscina pool of threads that run statements and encode their results. */
@Injectable()
export class QueryPoolService implements OnApplicationShutdown {
  private readonly logger = new Logger(QueryPoolService.name);
  private readonly pool: Piscina<ExecuteTask, ExecutionOutcome>;
  private readonly connectionCounts = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);

  constructor(@Inject(SLUICE_CONFIG) private readonly config: SluiceConfig) {
    const settings: ThreadSettings = {
      databaseUrl: config.databaseUrl!,
      redisUrl: config.redisUrl,
      keyPrefix: config.keyPrefix,
      pgPoolSize: config.pgPoolSize,
      pgMaxConnectionsPerThread: this.pgMaxConnections / config.workerThreads,
      credentialKey: config.credentialKey!,
      connectionCounts: this.connectionCounts,
      defaultFetchSize: config.defaultFetchSize,
      windowChunks: config.windowChunks,
      windowBytes: config.windowBytes,
      maxEntryBytes: config.maxEntryBytes,
      streamTtlSeconds: config.streamTtlSeconds,
      clientIdleTimeoutMs: config.clientIdleTimeoutMs,
      cancelPollMs: config.cancelPollMs,
    };
    this.pool = new Piscina({
      filename: join(__dirname, '..', 'tasks', 'execute-query.task.js'),
      minThreads: config.workerThreads,
      maxThreads: config.workerThreads,
      concurrentTasksPerWorker: config.tasksPerThread,
      idleTimeout: Number.POSITIVE_INFINITY,
      // Tasks wait on timers and sockets between chunks: a thread must never block in
      // Atomics.wait ('sync', the default) while its tasks are in flight.
      atomics: 'async',
      workerData: settings,
    });
  }

  /** The cap on statement connections, shared out evenly between the threads. */
  get pgMaxConnections(): number {
    const { pgMaxConnections, workerThreads } = this.config;
    return Math.floor(pgMaxConnections / workerThreads) * workerThreads;
  }

  /** Statement connections to PostgreSQL open in all threads now. */
  get pgConnections(): number {
    return Atomics.load(new Int32Array(this.connectionCounts), 0);
  }

  /** How many jobs the pool can run at once. */
  get capacity(): number {
    return this.config.workerThreads * this.config.tasksPerThread;
  }

  /** The pool's own figures, for metrics: busy share of thread time, tasks waiting, threads, tasks done. */
  get stats(): { utilization: number; queueSize: number; threads: number; completed: number } {
    const { utilization, queueSize, threads, completed } = this.pool;
    return { utilization, queueSize, threads: threads.length, completed };
  }

  /**
   * Runs a job in a thread; with a port, its records go there instead of to Redis. Without a
   * login, the thread uses the login role Sluice provisions for the job's role (service users).
   */
  run(
    job: ExecuteJobData,
    options: { port?: MessagePort; login?: PgLogin } = {},
  ): Promise<ExecutionOutcome> {
    const { port, login } = options;
    if (!port) return this.pool.run({ job, login });
    return this.pool.run({ job, port, login }, { transferList: [port] as never });
  }

  /** Start-up check: a thread answers and reaches PostgreSQL. */
  async check(): Promise<void> {
    const version = await (this.pool.run(undefined as never, {
      name: 'ping',
    }) as unknown as Promise<string>);
    this.logger.log(
      `pool of ${this.config.workerThreads} threads ready (${version.split(',')[0]})`,
    );
  }

  /**
   * Last phase of shutdown: whoever runs tasks (the worker's processor, standalone's executor)
   * drains them in onModuleDestroy, and Nest's module order must not decide which comes first —
   * standalone's executor sits in a global module, destroyed after this one.
   */
  async onApplicationShutdown(): Promise<void> {
    await this.pool.destroy();
  }
}
