import { Queue } from 'bullmq';
import type Redis from 'ioredis';
import { EXECUTE_QUEUE, ExecuteJobData } from '@app/contracts';
import { JobCounts, JobQueue, JobState } from '../job.queue';
import { RedisKeys } from '../redis.keys';

/** The execution queue on BullMQ; the job id is the query id. */
export class BullmqJobQueue implements JobQueue {
  readonly queue: Queue<ExecuteJobData>;

  constructor(
    private readonly connection: Redis,
    keys: RedisKeys,
    private readonly retentionSeconds: number,
  ) {
    this.queue = new Queue<ExecuteJobData>(EXECUTE_QUEUE, { connection, prefix: keys.bullPrefix });
  }

  async enqueue(job: ExecuteJobData): Promise<void> {
    await this.queue.add(EXECUTE_QUEUE, job, {
      jobId: job.queryId,
      // A statement must never run twice.
      attempts: 1,
      // Per-user fairness: a user's n-th concurrent query waits behind everyone's first.
      priority: job.priority,
      removeOnComplete: { age: this.retentionSeconds },
      removeOnFail: { age: this.retentionSeconds },
    });
  }

  async state(queryId: string): Promise<JobState> {
    // Taken jobs first, in one MULTI: whether BullMQ lists the job as active, and whether the
    // worker that took it still holds its lock. Read together, so that a job that finishes
    // between two reads (BullMQ deletes the lock as it moves the job on) is never taken for lost.
    const [listed, locked] = (
      (await this.connection
        .multi()
        .lpos(this.queue.keys.active, queryId)
        .exists(this.lockKey(queryId))
        .exec()) ?? []
    ).map(([err, value]) => {
      if (err) throw err;
      return value as number | null;
    });
    if (listed !== null && listed !== undefined) return locked ? 'active' : 'lost';
    const state = await this.queue.getJobState(queryId);
    switch (state) {
      case 'waiting':
      case 'delayed':
      case 'prioritized':
      case 'waiting-children':
        return 'queued';
      case 'active':
        // Taken since the read above: BullMQ sets the lock in the same script.
        return 'active';
      case 'completed':
        return 'completed';
      case 'failed':
        return 'failed';
      default:
        return 'unknown';
    }
  }

  /**
   * BullMQ has no call for a waiting job's place; its public `getRanges` hands over every waiting
   * id, once per query listed. So this reads, in one MULTI, how BullMQ keeps waiting jobs: plain
   * ones in the `wait` list (pushed left, taken right), prioritized ones in the `prioritized`
   * sorted set (lowest score taken first), plain ones taken before any prioritized one. The key
   * names are BullMQ's own (`queue.keys`); the layout is pinned by bullmq-job.queue.spec.ts, which
   * fails if a BullMQ upgrade changes it (against getRanges and the order a worker takes jobs).
   */
  async position(queryId: string): Promise<number | undefined> {
    const { wait, prioritized } = this.queue.keys;
    const result = await this.connection
      .multi()
      .zrank(prioritized, queryId)
      .lpos(wait, queryId)
      .llen(wait)
      .exec();
    const [rank, lpos, llen] = (result ?? []).map(([err, value]) => {
      if (err) throw err;
      return value as number | null;
    });
    if (lpos !== null && lpos !== undefined) return (llen ?? 0) - lpos - 1;
    if (rank !== null && rank !== undefined) return (llen ?? 0) + rank;
    return undefined;
  }

  async waitingCount(): Promise<number> {
    return this.queue.getJobCountByTypes('waiting', 'prioritized');
  }

  async counts(): Promise<JobCounts> {
    const counts = await this.queue.getJobCounts(
      'wait',
      'prioritized',
      'active',
      'delayed',
      'completed',
      'failed',
    );
    return {
      waiting: (counts.wait ?? 0) + (counts.prioritized ?? 0),
      active: counts.active ?? 0,
      delayed: counts.delayed ?? 0,
      completed: counts.completed ?? 0,
      failed: counts.failed ?? 0,
    };
  }

  async removeQueued(queryId: string): Promise<boolean> {
    const job = await this.queue.getJob(queryId);
    if (!job) return false;
    try {
      // remove() refuses a job a worker holds the lock of.
      await job.remove();
      return true;
    } catch {
      return false;
    }
  }

  /**
   * The key of the lock a worker holds on a job while it runs it: set with a TTL of the worker's
   * lockDuration when it takes the job and renewed every lockDuration / 2, so it is gone within
   * one lockDuration of the worker's death, whether or not another worker is left to run BullMQ's
   * stalled-job check. BullMQ has no public call for it; its layout (`<prefix>:<queue>:<id>:lock`)
   * is pinned by bullmq-job.queue.spec.ts, which fails if a BullMQ upgrade changes it.
   */
  private lockKey(queryId: string): string {
    return `${this.queue.toKey(queryId)}:lock`;
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
