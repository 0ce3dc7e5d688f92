import { ExecuteJobData, Lane } from '@app/contracts';

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

/**
 * How long, and how many, finished jobs the queue keeps (SLUICE_JOB_RETENTION_SECONDS and
 * SLUICE_JOB_RETENTION_COUNT): each lane keeps at most `count` completed and `count` failed jobs,
 * none older than `seconds`; 0 jobs: a job is forgotten as it ends. What a query did stays in the
 * query registry for its own retention, whatever the queue keeps.
 */
export interface JobRetention {
  seconds: number;
  count: number;
}

/** Bytes of statement and values a finished job may keep as they were sent. */
export const RETAINED_JOB_BYTES = 4096;

/**
 * What a finished job keeps of its data, when less than it was sent with: a statement and values
 * past RETAINED_JOB_BYTES are cut (the values dropped), so that the finished jobs a queue keeps
 * (up to SLUICE_JOB_RETENTION_COUNT a lane) never hold a body limit each. Undefined: keep it all.
 */
export function retainedJobData(data: ExecuteJobData): ExecuteJobData | undefined {
  let bytes = Buffer.byteLength(data.text);
  for (const value of data.values) bytes += value === null ? 0 : Buffer.byteLength(value);
  if (bytes <= RETAINED_JOB_BYTES) return undefined;
  const head = data.text.slice(0, 1000);
  return {
    ...data,
    text: `${head}… (${data.text.length} characters, cut once run)`,
    values: [],
    types: [],
  };
}

/**
 * Producer side of the execution queue: one lane per `Lane`, each job in the lane its data
 * names. A query id is unique across lanes, so calls that take one find the job in its lane.
 */
export interface JobQueue {
  enqueue(job: ExecuteJobData): Promise<void>;
  /** Current state of a job, `lost` included. */
  state(queryId: string): Promise<JobState>;
  /**
   * Jobs ahead of this one in its lane while it waits (0: next), undefined when it does not
   * wait. Lanes are served apart, so jobs of the other lane are never ahead of it.
   */
  position(queryId: string): Promise<number | undefined>;
  /** Jobs waiting, all users and lanes together. */
  waitingCount(): Promise<number>;
  /** Each lane's depth by state, all users together (for metrics). */
  counts(): Promise<Record<Lane, JobCounts>>;
  /** Removes a job that no worker took yet; false when it is already running or gone. */
  removeQueued(queryId: string): Promise<boolean>;
  /**
   * The ids of jobs waiting or running, all lanes together, at most `limit` of them: whatever
   * their age, so that a list of queries can show every one under way, however many have been
   * sent since.
   */
  openIds(limit: number): Promise<string[]>;
  close(): Promise<void>;
}
