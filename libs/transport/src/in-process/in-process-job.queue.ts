import { ExecuteJobData } from '@app/contracts';
import { JobCounts, JobQueue, JobState } from '../job.queue';

/** Runs one job; resolves when it is done. */
export type JobHandler = (job: ExecuteJobData) => Promise<void>;

/** The job queue of standalone mode: FIFO in memory, a fixed number of jobs at once. */
export class InProcessJobQueue implements JobQueue {
  private readonly waiting: ExecuteJobData[] = [];
  private readonly states = new Map<string, JobState>();
  private handler: JobHandler | undefined;
  private concurrency = 1;
  private running = 0;
  private closed = false;

  constructor(private readonly retentionSeconds: number) {}

  /** Starts taking jobs. */
  consume(handler: JobHandler, concurrency: number): void {
    this.handler = handler;
    this.concurrency = concurrency;
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
    return Promise.resolve(at < 0 ? undefined : at);
  }

  waitingCount(): Promise<number> {
    return Promise.resolve(this.waiting.length);
  }

  /** Only what this queue keeps: finished jobs are forgotten after their retention. */
  counts(): Promise<JobCounts> {
    return Promise.resolve({ waiting: this.waiting.length, active: this.running });
  }

  removeQueued(queryId: string): Promise<boolean> {
    const at = this.waiting.findIndex((j) => j.queryId === queryId);
    if (at < 0) return Promise.resolve(false);
    this.waiting.splice(at, 1);
    this.states.delete(queryId);
    return Promise.resolve(true);
  }

  close(): Promise<void> {
    this.closed = true;
    this.waiting.length = 0;
    return Promise.resolve();
  }

  private pump(): void {
    while (this.handler && this.running < this.concurrency && this.waiting.length > 0) {
      const job = this.waiting.shift()!;
      this.running += 1;
      this.states.set(job.queryId, 'active');
      this.handler(job).then(
        () => this.finish(job.queryId, 'completed'),
        () => this.finish(job.queryId, 'failed'),
      );
    }
  }

  private finish(queryId: string, state: JobState): void {
    this.running -= 1;
    this.states.set(queryId, state);
    setTimeout(() => this.states.delete(queryId), this.retentionSeconds * 1000).unref();
    this.pump();
  }
}
