import { ExecuteJobData } from '@app/contracts';

/** Lifecycle of a job as the queue sees it. */
export type JobState = 'queued' | 'active' | 'completed' | 'failed' | 'unknown';

/** Producer side of the execution queue. */
export interface JobQueue {
  enqueue(job: ExecuteJobData): Promise<void>;
  /** Current state of a job. */
  state(queryId: string): Promise<JobState>;
  /** Removes a job that no worker took yet; false when it is already running or gone. */
  removeQueued(queryId: string): Promise<boolean>;
  close(): Promise<void>;
}
