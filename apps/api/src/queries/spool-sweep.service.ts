import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnModuleDestroy,
} from '@nestjs/common';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { ResultSource, ResultSpool, queryOfSegment } from '@app/transport';
import { ApiMetricsService } from '../metrics/api-metrics.service';
import { RESULT_SOURCE, RESULT_SPOOL } from '../infra/tokens';

/**
 * Deletes segments whose kept result is gone: its TTL passed (its list lapsed in Redis, or was
 * dropped in memory), it was dropped while the store was away, or a worker died between writing a
 * segment and listing it. Every SLUICE_SPOOL_SWEEP_SECONDS, each api lists the spool and deletes
 * the segments of every query that keeps no result, once the newest of them is
 * SLUICE_SPOOL_ORPHAN_SECONDS old (a segment being listed right now is not). Deletes are
 * idempotent: several apis sweeping at once only repeat each other.
 */
@Injectable()
export class SpoolSweepService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('SpoolSweep');
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    @Inject(RESULT_SPOOL) private readonly spool: ResultSpool | null,
    @Inject(RESULT_SOURCE) private readonly results: ResultSource,
    private readonly metrics: ApiMetricsService,
  ) {}

  onApplicationBootstrap(): void {
    const seconds = this.config.spool?.sweepSeconds ?? 0;
    if (!this.spool || seconds === 0) return;
    this.timer = setInterval(() => this.start(), seconds * 1000);
    this.timer.unref();
  }

  async onModuleDestroy(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One sweep at a time: a slow one is not stacked on by the next tick. */
  private start(): void {
    if (this.running) return;
    this.running = this.sweep()
      .then(() => undefined)
      .catch((err: Error) => {
        this.metrics.spoolError('sweep');
        this.logger.warn(`could not sweep the spool: ${err.message}`);
      })
      .finally(() => (this.running = undefined));
  }

  /**
   * One pass; what it found, for /metrics: the spool's objects and bytes, after the deletes. Only
   * keys Sluice makes are looked at: the rest of the bucket or directory is never touched.
   */
  async sweep(): Promise<{ deleted: number; failed: number }> {
    const spool = this.spool!;
    const oldEnough = Date.now() - this.config.spool!.orphanSeconds * 1000;
    const byQuery = new Map<string, { keys: string[]; bytes: number; newest: number }>();
    for await (const entry of spool.list()) {
      const queryId = queryOfSegment(entry.key);
      // Not a segment Sluice wrote: someone else's, never touched.
      if (queryId === undefined) continue;
      const query = byQuery.get(queryId) ?? { keys: [], bytes: 0, newest: 0 };
      query.keys.push(entry.key);
      query.bytes += entry.size;
      query.newest = Math.max(query.newest, entry.modifiedAt);
      byQuery.set(queryId, query);
    }
    let deleted = 0;
    let objects = 0;
    let bytes = 0;
    let failed = 0;
    for (const [queryId, query] of byQuery) {
      if (query.newest < oldEnough && !(await this.results.kept(queryId))) {
        try {
          await spool.remove(query.keys);
          deleted += query.keys.length;
          continue;
        } catch (err) {
          // One query's segments the store would not delete stop no other's: the next pass tries again.
          failed++;
          this.metrics.spoolError('sweep');
          this.logger.warn(
            `could not delete the segments of query ${queryId}: ${(err as Error).message}`,
          );
        }
      }
      objects += query.keys.length;
      bytes += query.bytes;
    }
    this.metrics.spooled(objects, bytes);
    if (deleted > 0) this.logger.log(`deleted ${deleted} segments of kept results that are gone`);
    return { deleted, failed };
  }
}
