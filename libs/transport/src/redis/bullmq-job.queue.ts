import { Queue } from 'bullmq';
import type Redis from 'ioredis';
import { EXECUTE_QUEUE, ExecuteJobData } from '@app/contracts';
import { JobQueue, JobState } from '../job.queue';
import { RedisKeys } from '../redis.keys';

/** The execution queue on BullMQ; the job id is the query id. */
export class BullmqJobQueue implements JobQueue {
  readonly queue: Queue<ExecuteJobData>;

  constructor(
    connection: Redis,
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
      removeOnComplete: { age: this.retentionSeconds },
      removeOnFail: { age: this.retentionSeconds },
    });
  }

  async state(queryId: string): Promise<JobState> {
    const state = await this.queue.getJobState(queryId);
    switch (state) {
      case 'waiting':
      case 'delayed':
      case 'prioritized':
      case 'waiting-children':
        return 'queued';
      case 'active':
        return 'active';
      case 'completed':
        return 'completed';
      case 'failed':
        return 'failed';
      default:
        return 'unknown';
    }
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

  async close(): Promise<void> {
    await this.queue.close();
  }
}
