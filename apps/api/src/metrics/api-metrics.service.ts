import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { SLUICE_CONFIG, SluiceConfig, heapGrowthGauge, isStandalone } from '@app/config';
import { QueryPoolService, registerPoolMetrics, spoolWriteErrorsOf } from '@app/execution';
import { Lane, QUERY_TRANSITIONS, QueryState } from '@app/contracts';
import { JobQueue, QueryRegistry, ResultSource } from '@app/transport';
import { WorkerRosterService } from '../health/worker-roster.service';
import { RevocationService } from '../auth/revocation.service';
import { JOB_QUEUE, QUERY_REGISTRY, RESULT_SOURCE } from '../infra/tokens';

/** Recent queries looked at for the kept-result gauges (the registry's index, newest first). */
const KEPT_SCAN = 500;
import { ExecuteSummary } from '../logging/execute.summary';
import { ServiceHistory, noneQueued } from './service.history';

/** Seconds: from a few milliseconds to the longest statement time limit worth telling apart. */
const SECONDS_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800,
];

/**
 * Prometheus metrics of an api process: queue depth by state, queries by outcome, duration and
 * queue-wait histograms, rows and bytes streamed, live workers, Node's own (event-loop delay
 * among them) and, in standalone mode, the thread pool's utilisation.
 */
@Injectable()
export class ApiMetricsService implements OnModuleDestroy {
  readonly registry = new Registry();
  private readonly logger = new Logger(ApiMetricsService.name);
  private readonly queries: Counter<'outcome'>;
  private readonly duration: Histogram<'outcome'>;
  private readonly queueWait: Histogram<'lane'>;
  private readonly rows: Counter;
  private readonly bytes: Counter;
  private readonly spoolErrors: Counter<'operation'>;
  private readonly spooledObjects: Gauge;
  private readonly spooledBytes: Gauge;
  private pool: QueryPoolService | undefined;
  private readonly resultTtlMs: number;
  private scan: { at: number; result: Promise<Map<string, number>> } | undefined;
  /** The last minutes the admin page charts: requests as they end, the queue every bucket. */
  readonly history = new ServiceHistory();
  private readonly sampler: NodeJS.Timeout;

  constructor(
    @Inject(SLUICE_CONFIG) config: SluiceConfig,
    @Inject(JOB_QUEUE) private readonly queue: JobQueue,
    private readonly roster: WorkerRosterService,
    moduleRef: ModuleRef,
    @Inject(QUERY_REGISTRY) private readonly queryRegistry: QueryRegistry,
    @Inject(RESULT_SOURCE) private readonly results: ResultSource,
    revocations: RevocationService,
  ) {
    this.resultTtlMs = config.resultTtlSeconds * 1000;
    this.sampler = setInterval(() => void this.sampleQueue(), this.history.bucketMs).unref();
    this.registry.setDefaultLabels({ app: 'api' });
    collectDefaultMetrics({ register: this.registry });
    // Standalone mode runs the pool in this process; cluster apis have none.
    try {
      this.pool = moduleRef.get(QueryPoolService, { strict: false });
    } catch {
      this.pool = undefined;
    }
    const registers = [this.registry];
    new Gauge({ ...heapGrowthGauge(), registers });
    this.queries = new Counter({
      name: 'sluice_queries_total',
      help: 'Execute requests this api served, by outcome: the final state of the query, rejected (refused before it was queued), or accepted (answered 202 before its result).',
      labelNames: ['outcome'],
      registers,
    });
    this.duration = new Histogram({
      name: 'sluice_query_duration_seconds',
      help: 'Run time of queries served by this api, from the start of execution to the final status.',
      labelNames: ['outcome'],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.queueWait = new Histogram({
      name: 'sluice_query_queue_wait_seconds',
      help: 'Time queries served by this api waited in the queue before a worker started them, by lane.',
      labelNames: ['lane'],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.rows = new Counter({
      name: 'sluice_result_rows_total',
      help: 'Result rows streamed to clients by this api.',
      registers,
    });
    this.bytes = new Counter({
      name: 'sluice_result_bytes_total',
      help: 'Result body bytes streamed to clients by this api (after compression, if any).',
      registers,
    });
    const depth: Gauge<'lane' | 'state'> = new Gauge({
      name: 'sluice_queue_jobs',
      help: !isStandalone(config)
        ? 'Jobs in the BullMQ execution queues, by lane and state (all apis and workers together).'
        : 'Jobs in the in-process queue of this process, by lane and state.',
      labelNames: ['lane', 'state'],
      registers,
      collect: () =>
        this.quietly('queue depth', async () => {
          for (const [lane, counts] of Object.entries(await this.queue.counts())) {
            for (const [state, count] of Object.entries(counts)) {
              if (count !== undefined) depth.set({ lane, state }, count);
            }
          }
        }),
    });
    const workers: Gauge = new Gauge({
      name: 'sluice_workers_alive',
      help: 'Workers whose heartbeat is recent (standalone: 1, the in-process pool).',
      registers,
      collect: () =>
        this.quietly('workers', async () => {
          workers.set((await this.roster.alive()).length);
        }),
    });
    const kept: Gauge<'state'> = new Gauge({
      name: 'sluice_kept_results',
      help: 'Queries whose result is kept (wait_timeout, resumable, Idempotency-Key) among the recent ones, by state; finished ones until their result expires.',
      labelNames: ['state'],
      registers,
      collect: () =>
        this.quietly('kept results', async () => {
          for (const [state, n] of await this.keptScan()) kept.set({ state }, n);
        }),
    });
    const keptBytes: Gauge = new Gauge({
      name: 'sluice_kept_result_bytes',
      help: 'Body bytes all kept results hold now, running ones included (bounded by SLUICE_RESULT_TOTAL_MAX_BYTES; all api processes together in cluster mode).',
      registers,
      collect: () =>
        this.quietly('kept result bytes', async () =>
          keptBytes.set(await this.results.keptBytes()),
        ),
    });
    this.spooledObjects = new Gauge({
      name: 'sluice_spooled_objects',
      help: "Segments of kept results in the spool (SLUICE_SPOOL_URL), as this api's last sweep counted them.",
      registers,
    });
    this.spooledBytes = new Gauge({
      name: 'sluice_spooled_bytes',
      help: "Bytes of kept results' segments in the spool, as this api's last sweep counted them.",
      registers,
    });
    // Standalone: this process writes kept results too.
    const writes = this.pool ? spoolWriteErrorsOf(this.pool) : undefined;
    this.spoolErrors = new Counter({
      name: 'sluice_spool_errors_total',
      help: 'Operations on the spool that failed in this api: read (a fetch), check (a kept query refused 503 at enqueue), sweep; in standalone mode also write (a kept result the spool refused; the query failed).',
      labelNames: ['operation'],
      registers,
      collect() {
        writes?.(this);
      },
    });
    const operations = ['read', 'check', 'sweep', ...(writes ? ['write'] : [])];
    for (const operation of operations) this.spoolErrors.inc({ operation }, 0);
    new Gauge({
      name: 'sluice_revoked_tokens_cached',
      help: 'Revoked token ids this api holds in memory, read from sluice.revoked_tokens (bounded; beyond it, checks ask the database).',
      registers,
      collect() {
        this.set(revocations.cached);
      },
    });
    if (this.pool) registerPoolMetrics(this.registry, this.pool);
  }

  /** Kept results among the registry's recent queries, by state (read at most once a second). */
  private keptScan(): Promise<Map<string, number>> {
    if (this.scan && Date.now() - this.scan.at < 1000) return this.scan.result;
    const result = this.scanKept();
    this.scan = { at: Date.now(), result };
    return result;
  }

  private async scanKept(): Promise<Map<string, number>> {
    const now = Date.now();
    const states = Object.keys(QUERY_TRANSITIONS) as QueryState[];
    const counts = new Map<string, number>(states.map((state) => [state, 0]));
    for (const record of await this.queryRegistry.list(KEPT_SCAN)) {
      if (!record.kept) continue;
      const finished = record.finishedAt !== undefined;
      if (finished && record.finishedAt! + this.resultTtlMs < now) continue;
      counts.set(record.state, (counts.get(record.state) ?? 0) + 1);
    }
    return counts;
  }

  /** What the spool holds, as a sweep found it. */
  spooled(objects: number, bytes: number): void {
    this.spooledObjects.set(objects);
    this.spooledBytes.set(bytes);
  }

  /** Counts an operation on the spool that failed. */
  spoolError(operation: 'read' | 'check' | 'sweep'): void {
    this.spoolErrors.inc({ operation });
  }

  /** Counts one finished execute request. */
  observe(summary: ExecuteSummary): void {
    this.history.request(summary.outcome, summary.durationMs);
    this.queries.inc({ outcome: summary.outcome });
    if (summary.runMs !== undefined) {
      this.duration.observe({ outcome: summary.outcome }, summary.runMs / 1000);
    }
    if (summary.queueWaitMs !== undefined) {
      this.queueWait.observe({ lane: summary.lane ?? 'interactive' }, summary.queueWaitMs / 1000);
    }
    if (summary.rows > 0) this.rows.inc(summary.rows);
    if (summary.bytes > 0) this.bytes.inc(summary.bytes);
  }

  /** The queue's depth per lane, for the admin page's chart. */
  private async sampleQueue(): Promise<void> {
    await this.quietly('queue depth history', async () => {
      const counts = await this.queue.counts();
      const queued = noneQueued();
      for (const lane of Object.keys(queued) as Lane[]) queued[lane] = counts[lane]?.waiting ?? 0;
      this.history.queueDepth(queued);
    });
  }

  onModuleDestroy(): void {
    clearInterval(this.sampler);
  }

  /** A collector that fails leaves its last values and logs; /metrics still answers. */
  private async quietly(what: string, collect: () => Promise<void>): Promise<void> {
    try {
      await collect();
    } catch (err) {
      this.logger.warn(`metrics: ${what} unavailable: ${(err as Error).message}`);
    }
  }
}
