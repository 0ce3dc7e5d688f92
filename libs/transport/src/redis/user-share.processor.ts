import { DelayedError, Job, Processor } from 'bullmq';
import { ExecuteJobData, Lane, pastLatestStart } from '@app/contracts';
import { UserSlots } from '../user.slots';

/** How long a job whose user holds its share of a worker's slots waits before it is taken again. */
export const PUT_OFF_MS = 250;

/** Jobs of one user a worker remembers putting off (more are brought back by time alone). */
const REMEMBERED_PER_USER = 256;

/**
 * A BullMQ processor of one lane that runs a job only while its user holds less than its share of
 * this worker's slots (UserSlots); past it, the job goes back to the queue, delayed PUT_OFF_MS, for
 * this worker or another to take again, its priority kept. Never started, it is never run twice.
 * When one of the user's slots here frees, the oldest job put off here is brought back at once, so
 * that a user's burst runs as fast as its share allows, in order. A job past its latest start needs
 * no slot: `run` only ends it.
 */
export function userShareProcessor<R>(
  slots: UserSlots,
  lane: Lane,
  run: (job: Job<ExecuteJobData>) => Promise<R>,
): Processor<ExecuteJobData, R> {
  const putOff = new Map<string, Map<string, Job<ExecuteJobData>>>();
  return async (job, token) => {
    const user = job.data.username;
    if (pastLatestStart(job.data)) return run(job);
    if (!slots.take(user, lane)) {
      remember(putOff, user, job);
      await job.moveToDelayed(Date.now() + PUT_OFF_MS, token);
      // BullMQ's sign that the job was moved on, not failed.
      throw new DelayedError();
    }
    putOff.get(user)?.delete(job.id!);
    try {
      return await run(job);
    } finally {
      slots.release(user, lane);
      await bringBack(putOff, user);
    }
  };
}

function remember(
  putOff: Map<string, Map<string, Job<ExecuteJobData>>>,
  user: string,
  job: Job<ExecuteJobData>,
): void {
  let jobs = putOff.get(user);
  if (!jobs) putOff.set(user, (jobs = new Map<string, Job<ExecuteJobData>>()));
  // Put off again: it keeps its place among the user's.
  if (jobs.has(job.id!)) return;
  if (jobs.size >= REMEMBERED_PER_USER) jobs.delete(jobs.keys().next().value!);
  jobs.set(job.id!, job);
}

/** Promotes the oldest of the user's jobs put off here that still waits delayed. */
async function bringBack(
  putOff: Map<string, Map<string, Job<ExecuteJobData>>>,
  user: string,
): Promise<void> {
  const jobs = putOff.get(user);
  if (!jobs) return;
  for (const [id, job] of jobs) {
    jobs.delete(id);
    try {
      await job.promote();
      break;
    } catch {
      // Not delayed any more (taken again, run by another worker, cancelled): the next one.
    }
  }
  if (jobs.size === 0) putOff.delete(user);
}
