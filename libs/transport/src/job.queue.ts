import { ExecuteJobData } from '@app/contracts';

/**
 * Lifecycle of a job as the queue sees it. `active`: a worker holds it and is alive; `lost`: the
 * queue still lists it as taken, but the worker that took it is gone (it stopped renewing its
 * hold on the job) — whether or not any other worker is left to notice.
 */
export type JobState = 'queued' | 'active' | 'lost' | 'completed' | 'failed' | 'unknown';

/** Jobs in the queue by state; a state the queue does not keep is absent. */
export type JobCounts = {
  waiting: number;
  active: number;
  delayed?: number;
  completed?: number;
  failed?: number;
};

/** Producer side of the execution queue. */
export interface JobQueue {
  enqueue(job: ExecuteJobData): Promise<void>;
  /** Current state of a job, `lost` included. */
  state(queryId: string): Promise<JobState>;
  /** Jobs ahead of this one while it waits (0: next), undefined when it does not wait. */
  position(queryId: string): Promise<number | undefined>;
  /** Jobs waiting, all users together. */
  waitingCount(): Promise<number>;
  /** The queue's depth by state, all users together (for metrics). */
  counts(): Promise<JobCounts>;
  /** Removes a job that no worker took yet; false when it is already running or gone. */
  removeQueued(queryId: string): Promise<boolean>;
  close(): Promise<void>;
}
