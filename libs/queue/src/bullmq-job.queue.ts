import { JobType, Queue } from 'bullmq';
import { ExecuteJobData, LANES, LANE_QUEUES, Lane } from '@app/contracts';
import {
  JobCounts,
  JobQueue,
  JobRetention,
  JobState,
  RedisClient,
  RedisKeys,
} from '@app/transport';

/** The results of one MULTI, in order; a failed command throws. */
function replies(result: [Error | null, unknown][] | null): (number | null)[] {
  return (result ?? []).map(([err, value]) => {
    if (err) throw err;
    return value as number | null;
  });
}

/**
 * The execution queue on BullMQ: one BullMQ queue per lane (LANE_QUEUES), all under the
 * deployment's hash-tagged prefix, so that reads across lanes still go in one MULTI. The job id
 * is the query id.
 */
export class BullmqJobQueue implements JobQueue {
  readonly queues: Readonly<Record<Lane, Queue<ExecuteJobData>>>;
  /** BullMQ's removeOnComplete / removeOnFail: a count of 0 removes a job as it ends. */
  private readonly keep: { age: number; count: number };
  /**
   * @param connection BullMQ's own, closed by close(), never one shared with others. BullMQ
   * defines its ~50 Lua scripts on the connection it uses, and ioredis copies every script
   * defined on a connection into each pipeline it builds — each MULTI, and each auto-pipelined
   * batch — which made that copying a tenth of the api's CPU on small queries when the registry
   * and readers shared it.
   */
  constructor(
    private readonly connection: RedisClient,
    keys: RedisKeys,
    retention: JobRetention,
  ) {
    // Bounded by count as well as age: at a few hundred queries a second, an hour of finished
    // jobs (≈1.7 KB each) was gigabytes of Redis, and each finish dearer for the larger sets.
    this.keep = { age: retention.seconds, count: retention.count };
    // Failures reach callers through the commands they send; ioredis reconnects by itself.
    connection.on('error', () => undefined);
    const queue = (lane: Lane) =>
      new Queue<ExecuteJobData>(LANE_QUEUES[lane], { connection, prefix: keys.bullPrefix });
    this.queues = { interactive: queue('interactive'), export: queue('export') };
  }

  async enqueue(job: ExecuteJobData): Promise<void> {
    // The job's name is its user's: what the fairness check reads (OtherUsersWaiting) without
    // decoding the job's data, which carries the statement; the dashboard shows it too.
    await this.queues[job.lane].add(job.username, job, {
      jobId: job.queryId,
      // A statement must never run twice.
      attempts: 1,
      // Per-user fairness: a user's burst waits behind everyone else's first queries.
      priority: job.priority,
      removeOnComplete: this.keep,
      removeOnFail: this.keep,
    });
  }

  async state(queryId: string): Promise<JobState> {
    // Taken jobs first, in one MULTI: whether BullMQ lists the job as active in a lane, and
    // whether the worker that took it still holds its lock. Read together, so that a job that
    // finishes between two reads (BullMQ deletes the lock as it moves the job on) is never taken
    // for lost.
    const multi = this.connection.multi();
    for (const lane of LANES) {
      multi.lpos(this.queues[lane].keys.active, queryId).exists(this.lockKey(lane, queryId));
    }
    const read = replies(await multi.exec());
    for (let i = 0; i < LANES.length; i += 1) {
      const [listed, locked] = read.slice(2 * i, 2 * i + 2);
      if (listed !== null && listed !== undefined) return locked ? 'active' : 'lost';
    }
    for (const lane of LANES) {
      const state = this.stateOf(await this.queues[lane].getJobState(queryId));
      if (state !== 'unknown') return state;
    }
    return 'unknown';
  }

  private stateOf(state: string): JobState {
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
   * id, once per query listed. So this reads, in one MULTI, how BullMQ keeps waiting jobs in each
   * lane: plain ones in the `wait` list (pushed left, taken right), prioritized ones in the
   * `prioritized` sorted set (lowest score taken first), plain ones taken before any prioritized
   * one. A job put off (its user held its share of a worker's slots: userShareProcessor) waits in
   * the `delayed` set, behind every job waiting now and the jobs put off before it (the set is
   * ordered by when each is due back; Sluice delays no job for any other reason). The key names are BullMQ's own
   * (`queue.keys`); the layout is pinned by bullmq-job.queue.spec.ts, which fails if a BullMQ
   * upgrade changes it (against getRanges and the order a worker takes jobs).
   */
  async position(queryId: string): Promise<number | undefined> {
    const multi = this.connection.multi();
    for (const lane of LANES) {
      const { wait, prioritized, delayed } = this.queues[lane].keys;
      multi
        .zrank(prioritized, queryId)
        .lpos(wait, queryId)
        .llen(wait)
        .zrank(delayed, queryId)
        .zcard(prioritized);
    }
    const read = replies(await multi.exec());
    for (let i = 0; i < LANES.length; i += 1) {
      const [rank, lpos, llen, putOff, prioritizedCount] = read.slice(5 * i, 5 * i + 5);
      if (lpos !== null && lpos !== undefined) return (llen ?? 0) - lpos - 1;
      if (rank !== null && rank !== undefined) return (llen ?? 0) + rank;
      // Its rank among those put off: every one of them once read the same place.
      if (putOff !== null && putOff !== undefined) {
        return (llen ?? 0) + (prioritizedCount ?? 0) + putOff;
      }
    }
    return undefined;
  }

  async waitingCount(): Promise<number> {
    // Jobs put off (`delayed`: userShareProcessor) wait too: uncounted, the queued jobs of users
    // past their share of the slots were outside SLUICE_MAX_QUEUED.
    const counts = await Promise.all(
      LANES.map((lane) =>
        this.queues[lane].getJobCountByTypes('waiting', 'prioritized', 'delayed'),
      ),
    );
    return counts.reduce((sum, n) => sum + n, 0);
  }

  async counts(): Promise<Record<Lane, JobCounts>> {
    const counts = await Promise.all(
      LANES.map(async (lane) => [lane, await this.countsOf(lane)] as const),
    );
    return Object.fromEntries(counts) as Record<Lane, JobCounts>;
  }

  private async countsOf(lane: Lane): Promise<JobCounts> {
    const counts = await this.queues[lane].getJobCounts(
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
    for (const lane of LANES) {
      const job = await this.queues[lane].getJob(queryId);
      if (!job) continue;
      try {
        // remove() refuses a job a worker holds the lock of.
        await job.remove();
        return true;
      } catch {
        return false;
      }
    }
    return false;
  }

  /** Running jobs first (of every lane), then waiting ones: a cut list keeps those under way. */
  async openIds(limit: number): Promise<string[]> {
    if (limit <= 0) return [];
    const groups: JobType[][] = [
      ['active'],
      ['waiting', 'prioritized', 'delayed', 'paused', 'waiting-children'],
    ];
    const ids = await Promise.all(
      groups.flatMap((types) =>
        LANES.map((lane) => this.queues[lane].getRanges(types, 0, limit - 1)),
      ),
    );
    return [...new Set(ids.flat())].slice(0, limit);
  }

  /**
   * The key of the lock a worker holds on a job while it runs it: set with a TTL of the worker's
   * lockDuration when it takes the job and renewed every lockDuration / 2, so it is gone within
   * one lockDuration of the worker's death, whether or not another worker is left to run BullMQ's
   * stalled-job check. BullMQ has no public call for it; its layout (`<prefix>:<queue>:<id>:lock`)
   * is pinned by bullmq-job.queue.spec.ts, which fails if a BullMQ upgrade changes it.
   */
  private lockKey(lane: Lane, queryId: string): string {
    return `${this.queues[lane].toKey(queryId)}:lock`;
  }

  async close(): Promise<void> {
    await Promise.all(LANES.map((lane) => this.queues[lane].close()));
    // Closed: a connection already down has nothing left to flush.
    await this.connection.quit().catch(() => this.connection.disconnect());
  }
}
