import { ExecuteJobData } from '@app/contracts';

/**
 * Lifecycle of a job as the queue sees it. `active`: a worker holds it and is alive; `lost`: the
 * queue still lists it as taken, but the worker that took it is gone (it stopped renewing its
 * hold on the job) — whether or not any other worker is left to notice.
 */
export type JobState = 'queued' | 'active' | 'lost' | 'completed' | 'failed' | 'unknown';

/** Producer side of the execution queue. */
export interface JobQueue {
  enqueue(job: ExecuteJobData): Promise<void>;
  /** Current state of a job, `lost` included. */
  state(queryId: string): Promise<JobState>;
  /** Jobs ahead of this one while it waits (0: next), undefined when it does not wait. */
  position(queryId: string): Promise<number | undefined>;
  /** Jobs waiting, all users together. */
  waitingCount(): Promise<number>;
  /** Removes a job that no worker took yet; false when it is already running or gone. */
  removeQueued(queryId: string): Promise<boolean>;
  close(): Promise<void>;
}
