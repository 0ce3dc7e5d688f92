import { DelayedError, Job, Processor } from 'bullmq';
import { ExecuteJobData, Lane, pastLatestStart } from '@app/contracts';
import { UserSlots } from '../user.slots';

/** How long a job whose user holds its share of a worker's slots waits before it is taken again. */
export const PUT_OFF_MS = 250;

/**
 * A BullMQ processor of one lane that runs a job only while its user holds less than its share of
 * this worker's slots (UserSlots); past it, the job goes back to the queue, delayed PUT_OFF_MS, for
 * this worker or another to take again, its priority kept. Never started, it is never run twice.
 * A job past its latest start needs no slot: `run` only ends it.
 */
export function userShareProcessor<R>(
  slots: UserSlots,
  lane: Lane,
  run: (job: Job<ExecuteJobData>) => Promise<R>,
): Processor<ExecuteJobData, R> {
  return async (job, token) => {
    const user = job.data.username;
    if (pastLatestStart(job.data)) return run(job);
    if (!slots.take(user, lane)) {
      await job.moveToDelayed(Date.now() + PUT_OFF_MS, token);
      // BullMQ's sign that the job was moved on, not failed.
      throw new DelayedError();
    }
    try {
      return await run(job);
    } finally {
      slots.release(user, lane);
    }
  };
}
