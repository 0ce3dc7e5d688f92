import { LANES, Lane } from '@app/contracts';
import type { ExecuteOutcome } from '../logging/execute.summary';

const OUTCOMES: readonly ExecuteOutcome[] = [
  'succeeded',
  'failed',
  'cancelled',
  'rejected',
  'accepted',
];

/** Requests' durations a bucket keeps for its percentiles, at most (the rest are counted only). */
const MOST_SAMPLES = 5_000;

interface Bucket {
  at: number;
  outcomes: Record<ExecuteOutcome, number>;
  durations: number[];
  queued?: Record<Lane, number>;
}

/** One point of the admin page's charts. */
export interface HistoryPoint {
  /** Start of the bucket (epoch ms). */
  at: number;
  /** Execute requests ended in the bucket, per second, by outcome. */
  per_second: Record<ExecuteOutcome, number>;
  /** Of the requests' durations (ms); null: none ended. */
  p50_ms: number | null;
  p99_ms: number | null;
  /** Jobs waiting in each lane's queue when last sampled in the bucket; null: not sampled. */
  queued: Record<Lane, number> | null;
}

/** What GET /admin/api/stats answers: the last minutes, oldest point first. */
export interface ServiceHistoryView {
  bucket_ms: number;
  points: HistoryPoint[];
}

function percentile(sorted: number[], p: number): number | null {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/**
 * The last minutes of an api's execute requests (outcomes, durations) and of its queue's depth,
 * in buckets of `bucketMs`: what the admin page charts, kept in memory from what the api measures
 * anyway (no monitoring system needed to see it).
 */
export class ServiceHistory {
  private readonly buckets: Bucket[] = [];

  constructor(
    readonly bucketMs = 5_000,
    private readonly kept = 120,
  ) {}

  /** An execute request ended (its whole duration, as its client saw it). */
  request(outcome: ExecuteOutcome, durationMs: number, now = Date.now()): void {
    const bucket = this.bucketAt(now);
    bucket.outcomes[outcome] += 1;
    if (bucket.durations.length < MOST_SAMPLES) bucket.durations.push(durationMs);
  }

  /** The queue's depth now, per lane. */
  queueDepth(queued: Record<Lane, number>, now = Date.now()): void {
    this.bucketAt(now).queued = { ...queued };
  }

  /** Every bucket of the window ending now, empty ones included. */
  view(now = Date.now()): ServiceHistoryView {
    const last = this.start(now);
    const points: HistoryPoint[] = [];
    for (let at = last - (this.kept - 1) * this.bucketMs; at <= last; at += this.bucketMs) {
      const bucket = this.buckets.find((b) => b.at === at);
      // The current bucket has lasted only since its start (counted as a second at least).
      const seconds = (at === last ? Math.max(1_000, now - at) : this.bucketMs) / 1000;
      const sorted = [...(bucket?.durations ?? [])].sort((a, b) => a - b);
      points.push({
        at,
        per_second: Object.fromEntries(
          OUTCOMES.map((o) => [o, (bucket?.outcomes[o] ?? 0) / seconds]),
        ) as Record<ExecuteOutcome, number>,
        p50_ms: percentile(sorted, 50),
        p99_ms: percentile(sorted, 99),
        queued: bucket?.queued ?? null,
      });
    }
    return { bucket_ms: this.bucketMs, points };
  }

  private start(now: number): number {
    return now - (now % this.bucketMs);
  }

  private bucketAt(now: number): Bucket {
    const at = this.start(now);
    let bucket = this.buckets[this.buckets.length - 1];
    if (!bucket || bucket.at !== at) {
      bucket = {
        at,
        outcomes: Object.fromEntries(OUTCOMES.map((o) => [o, 0])) as Record<ExecuteOutcome, number>,
        durations: [],
      };
      this.buckets.push(bucket);
      const oldest = at - (this.kept - 1) * this.bucketMs;
      while (this.buckets[0].at < oldest) this.buckets.shift();
    }
    return bucket;
  }
}

/** An empty depth of every lane. */
export function noneQueued(): Record<Lane, number> {
  return Object.fromEntries(LANES.map((lane) => [lane, 0])) as Record<Lane, number>;
}
