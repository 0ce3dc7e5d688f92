import { ExecuteJobData, LANES, Lane, pastLatestStart } from '@app/contracts';
import { JobCounts, JobQueue, JobRetention, JobState } from '../job.queue';
import { UserSlots } from '../user.slots';

/** Runs one job; resolves when it is done. */
export type JobHandler = (job: ExecuteJobData) => Promise<void>;

/**
 * The job queue of standalone mode: in memory, in dispatch order, a fixed number of jobs of each
 * lane at once (the slots of that lane's pool), of which one user holds at most a share. A waiting
 * job that has no room does not hold back the jobs behind it of the other lane or of other users.
 */
export class InProcessJobQueue implements JobQueue {
  private readonly waiting: ExecuteJobData[] = [];
  private readonly states = new Map<string, JobState>();
  /** Finished jobs of each lane and outcome, oldest first, with when each ended. */
  private readonly finished = new Map<string, Map<string, number>>();
  private handler: JobHandler | undefined;
  private concurrency: Record<Lane, number> = { interactive: 1, export: 1 };
  private readonly running: Record<Lane, number> = { interactive: 0, export: 0 };
  private slots = new UserSlots(this.concurrency, 100);
  private closed = false;

  constructor(private readonly retention: JobRetention) {}

  /**
   * Starts taking jobs, at most `concurrency[lane]` of each lane at once, of one user's at most
   * `userSharePercent` of them (see UserSlots).
   */
  consume(handler: JobHandler, concurrency: Record<Lane, number>, userSharePercent: number): void {
    this.handler = handler;
    this.concurrency = { ...concurrency };
    this.slots = new UserSlots(this.concurrency, userSharePercent);
    this.pump();
  }

  enqueue(job: ExecuteJobData): Promise<void> {
    if (this.closed) return Promise.reject(new Error('queue is closed'));
    this.states.set(job.queryId, 'queued');
    // Kept in dispatch order: by priority, first come first served within one.
    const priority = job.priority ?? 1;
    const at = this.waiting.findIndex((j) => (j.priority ?? 1) > priority);
    if (at < 0) this.waiting.push(job);
    else this.waiting.splice(at, 0, job);
    this.pump();
    return Promise.resolve();
  }

  state(queryId: string): Promise<JobState> {
    return Promise.resolve(this.states.get(queryId) ?? 'unknown');
  }

  position(queryId: string): Promise<number | undefined> {
    const at = this.waiting.findIndex((j) => j.queryId === queryId);
    if (at < 0) return Promise.resolve(undefined);
    const { lane } = this.waiting[at];
    return Promise.resolve(this.waiting.slice(0, at).filter((j) => j.lane === lane).length);
  }

  waitingCount(): Promise<number> {
    return Promise.resolve(this.waiting.length);
  }

  /** Only what this queue keeps: finished jobs are forgotten (see JobRetention). */
  counts(): Promise<Record<Lane, JobCounts>> {
    const of = (lane: Lane): JobCounts => ({
      waiting: this.waiting.filter((j) => j.lane === lane).length,
      active: this.running[lane],
    });
    return Promise.resolve(
      Object.fromEntries(LANES.map((lane) => [lane, of(lane)])) as Record<Lane, JobCounts>,
    );
  }

  removeQueued(queryId: string): Promise<boolean> {
    const at = this.waiting.findIndex((j) => j.queryId === queryId);
    if (at < 0) return Promise.resolve(false);
    this.waiting.splice(at, 1);
    this.states.delete(queryId);
    return Promise.resolve(true);
  }

  openIds(limit: number): Promise<string[]> {
    const open: string[] = [];
    for (const [queryId, state] of this.states) {
      if (open.length >= limit) break;
      if (state === 'queued' || state === 'active') open.push(queryId);
    }
    return Promise.resolve(open);
  }

  close(): Promise<void> {
    this.closed = true;
    this.waiting.length = 0;
    return Promise.resolve();
  }

  private pump(): void {
    for (let at = this.nextRunnable(); this.handler && at >= 0; at = this.nextRunnable()) {
      const [job] = this.waiting.splice(at, 1);
      const { lane } = job;
      this.running[lane] += 1;
      // False for a job past its latest start whose user holds its share: it takes none.
      const held = this.slots.take(job.username, lane) || this.slots.borrow(job.username, lane);
      this.states.set(job.queryId, 'active');
      this.handler(job).then(
        () => this.finish(job, 'completed', { held }),
        () => this.finish(job, 'failed', { held }),
      );
    }
  }

  /**
   * The first waiting job there is room for, in its lane and in its user's share, or -1. A job
   * past its latest start needs no share: it is only ended. Failing that, the first whose user may
   * borrow a slot past its share (UserSlots.borrow) while no other user's job waits in its lane.
   */
  private nextRunnable(): number {
    const now = Date.now();
    const room = (j: ExecuteJobData) => this.running[j.lane] < this.concurrency[j.lane];
    const shared = this.waiting.findIndex(
      (j) => room(j) && (pastLatestStart(j, now) || this.slots.free(j.username, j.lane)),
    );
    if (shared >= 0) return shared;
    // The one user whose jobs wait in each lane, or null where several users' do.
    const alone = new Map<Lane, string | null>();
    for (const { lane, username } of this.waiting) {
      const seen = alone.get(lane);
      if (seen === undefined) alone.set(lane, username);
      else if (seen !== username) alone.set(lane, null);
    }
    return this.waiting.findIndex(
      (j) =>
        room(j) && alone.get(j.lane) === j.username && this.slots.mayBorrow(j.username, j.lane),
    );
  }

  private finish(job: ExecuteJobData, state: JobState, { held }: { held: boolean }): void {
    const { queryId, lane } = job;
    this.running[lane] -= 1;
    if (held) this.slots.release(job.username, lane);
    this.forgetOld(lane, state);
    if (this.retention.count > 0) {
      this.states.set(queryId, state);
      this.finishedOf(lane, state).set(queryId, Date.now());
    } else {
      this.states.delete(queryId);
    }
    this.pump();
  }

  /** Drops the finished jobs past their age, and the oldest while one more would pass the count. */
  private forgetOld(lane: Lane, state: JobState): void {
    const finished = this.finishedOf(lane, state);
    const oldest = Date.now() - this.retention.seconds * 1000;
    for (const [queryId, at] of finished) {
      if (at > oldest && finished.size < this.retention.count) break;
      finished.delete(queryId);
      this.states.delete(queryId);
    }
  }

  private finishedOf(lane: Lane, state: JobState): Map<string, number> {
    const key = `${lane}:${state}`;
    let finished = this.finished.get(key);
    if (!finished) this.finished.set(key, (finished = new Map<string, number>()));
    return finished;
  }
}
