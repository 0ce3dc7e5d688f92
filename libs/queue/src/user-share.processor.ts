import { DelayedError, Job, Processor } from 'bullmq';
import { ExecuteJobData, Lane, pastLatestStart } from '@app/contracts';
import { UserSlots } from '@app/transport';

/**
 * How long a job whose user holds its share of a worker's slots waits before it is taken again.
 * After QUICK_PUT_OFFS by the same worker, twice as long each time, up to PUT_OFF_MOST_MS: a take
 * and a put-off are two scripts, and a user's queue of long statements must not keep Redis busy.
 * Not from the start: the job may be bouncing off a worker where the user's share is held while
 * another worker, where it is not, has room for it; which worker takes it next is chance.
 * One of the user's slots here that frees brings it back at once anyway.
 */
export const PUT_OFF_MS = 250;
export const QUICK_PUT_OFFS = 8;
export const PUT_OFF_MOST_MS = 2000;

/**
 * How long a job of a user alone who holds every slot it may borrow here waits for one of them to
 * free before it is put off. A user's small queries end
 * within milliseconds of each other, so the slot is handed on in-process, where a put-off would
 * cost two scripts and a quarter second; a user's long statements are put off after this. One job
 * waits so at a time in a lane: the worker's free slots are taken by another user's job at most
 * this much later.
 */
export const HOLD_MS = 100;

/**
 * How long an answer that no other user's job waits in the lane stands for this worker: a share
 * is a limit for as long again after another user's job comes, and one script of Redis's less for
 * every job of a busy user alone.
 */
export const NONE_WAITING_MS = 10;

/** Jobs of one user a worker remembers putting off (more are brought back by time alone). */
const REMEMBERED_PER_USER = 256;

/**
 * A BullMQ processor of one lane that runs a job while its user holds less than its share of this
 * worker's slots (UserSlots), or past it, in a borrowed slot, while no other user's job waits: a
 * user alone pays nothing for the share. A user alone who holds every slot it may borrow here has
 * its job wait, up to HOLD_MS and one job at a time, for the slot one of its queries frees (then run
 * as taken before: a cancel may have come while it waited). Otherwise
 * the job goes back
 * to the queue, delayed PUT_OFF_MS, for
 * this worker or another to take again, its priority kept. Never started, it is never run twice.
 * When one of the user's slots here frees, the oldest job put off here is brought back at once, so
 * that a user's burst runs as fast as its share allows, in order. A job past its latest start needs
 * no slot: `run` only ends it. `run` is told whether the job was taken before (put off once): a
 * cancel that came meanwhile could not take it off the queue (see ResultSink.cancelAsked).
 */
export function userShareProcessor<R>(
  slots: UserSlots,
  lane: Lane,
  run: (job: Job<ExecuteJobData>, taken: { takenBefore: boolean }) => Promise<R>,
  {
    putOff = new PutOffJobs(),
    onPutOff,
    othersWaiting,
  }: {
    putOff?: PutOffJobs;
    onPutOff?: () => void;
    /** Whether a job of another user than this one waits in the lane (OtherUsersWaiting). */
    othersWaiting?: (user: string) => Promise<boolean>;
  } = {},
): Processor<ExecuteJobData, R> {
  /** Users for whom no other user's job waited in the lane, and when that was asked. */
  const aloneAt = new Map<string, number>();
  const alone = async (user: string): Promise<boolean> => {
    if (othersWaiting === undefined) return false;
    const now = Date.now();
    if (now - (aloneAt.get(user) ?? -Infinity) < NONE_WAITING_MS) return true;
    // A check Redis could not answer lends nothing: the job is put off as past its share.
    if (await othersWaiting(user).catch(() => true)) {
      aloneAt.delete(user);
      return false;
    }
    if (aloneAt.size >= REMEMBERED_PER_USER) aloneAt.clear();
    aloneAt.set(user, now);
    return true;
  };
  /** Jobs held for a slot, by user: each is handed the slot that one of the user's queries frees. */
  const held = new Map<string, ((handed: boolean) => void)[]>();
  const holding = () => [...held.values()].some((jobs) => jobs.length > 0);
  /**
   * Waits up to HOLD_MS for one of `user`'s slots here to be handed on: true with the slot held.
   * One job at a time in the lane, so that held jobs never fill the worker's free slot.
   */
  const handedOn = (user: string): Promise<boolean> => {
    if (holding()) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const jobs = held.get(user) ?? [];
      held.set(user, jobs);
      const hand = (handed: boolean) => {
        clearTimeout(timer);
        jobs.splice(jobs.indexOf(hand), 1);
        if (jobs.length === 0) held.delete(user);
        resolve(handed);
      };
      const timer = setTimeout(() => hand(false), HOLD_MS);
      jobs.push(hand);
    });
  };
  /**
   * Past its share, a user borrows a free slot while nobody else waits for one; holding every slot
   * it may borrow, its job waits a moment for one of them.
   */
  const slotPastShare = async (user: string): Promise<'borrowed' | 'handed' | undefined> => {
    // While another user's job waits, a job held here could keep the worker's free slot from it.
    if (!(await alone(user))) return undefined;
    if (slots.borrow(user, lane)) return 'borrowed';
    return (await handedOn(user)) ? 'handed' : undefined;
  };
  /** Gives the user's slot to its held job, if it has one, else back. */
  const release = async (user: string): Promise<void> => {
    const next = held.get(user)?.[0];
    if (next) return next(true);
    slots.release(user, lane);
    await putOff.bringBack(user);
  };
  return async (job, token) => {
    const user = job.data.username;
    // BullMQ counts each time a job is taken (moveToActive), put-offs included.
    const takenBefore = job.attemptsStarted > 1;
    if (pastLatestStart(job.data)) return run(job, { takenBefore });
    let slot: 'share' | 'borrowed' | 'handed' | undefined = slots.take(user, lane)
      ? 'share'
      : undefined;
    slot ??= await slotPastShare(user);
    if (!slot) {
      const times = putOff.remember(user, job);
      onPutOff?.();
      const slower = Math.max(0, times - QUICK_PUT_OFFS);
      const delay = Math.min(PUT_OFF_MOST_MS, PUT_OFF_MS * 2 ** slower);
      await job.moveToDelayed(Date.now() + delay, token);
      // BullMQ's sign that the job was moved on, not failed.
      throw new DelayedError();
    }
    putOff.taken(user, job.id!);
    try {
      // A job held for a slot is as one put off: a DELETE meanwhile could not take it off the
      // queue, only ask for its cancel, which `run` must look for.
      return await run(job, { takenBefore: takenBefore || slot === 'handed' });
    } finally {
      await release(user);
    }
  };
}

/** How often PutOffJobs forgets, of every user, the jobs past their latest start. */
const FORGET_LATE_EVERY_MS = 1000;

/**
 * The jobs one worker's lane put off, by user, oldest first, and how many times each: the one to
 * bring back when one of the user's slots here frees. A job past its latest start is forgotten
 * (any worker only ends it now, with no slot), so that the jobs of a user who stopped sending, run
 * or ended elsewhere, are not held here, their statements with them, until the worker stops.
 */
export class PutOffJobs {
  private readonly byUser = new Map<string, Map<string, PutOff>>();
  private forgotAt = 0;

  /** How many jobs are remembered, of every user. */
  get size(): number {
    let size = 0;
    for (const jobs of this.byUser.values()) size += jobs.size;
    return size;
  }

  /** Notes the job as put off once more; how many times this worker has put it off. */
  remember(user: string, job: Job<ExecuteJobData>): number {
    this.forgetLate();
    let jobs = this.byUser.get(user);
    if (!jobs) this.byUser.set(user, (jobs = new Map<string, PutOff>()));
    const known = jobs.get(job.id!);
    // Put off again: it keeps its place among the user's.
    if (known) return (known.times += 1);
    if (jobs.size >= REMEMBERED_PER_USER) jobs.delete(jobs.keys().next().value!);
    jobs.set(job.id!, { job, times: 1 });
    return 1;
  }

  /** The job was taken to run here. */
  taken(user: string, id: string): void {
    const jobs = this.byUser.get(user);
    jobs?.delete(id);
    if (jobs?.size === 0) this.byUser.delete(user);
  }

  /** Promotes the oldest of the user's jobs put off here that still waits delayed. */
  async bringBack(user: string): Promise<void> {
    this.forgetLate();
    const jobs = this.byUser.get(user);
    if (!jobs) return;
    for (const [id, { job }] of jobs) {
      jobs.delete(id);
      try {
        await job.promote();
        break;
      } catch {
        // Not delayed any more (taken again, run by another worker, cancelled): the next one.
      }
    }
    if (jobs.size === 0) this.byUser.delete(user);
  }

  /** Forgets the jobs past their latest start, at most once every FORGET_LATE_EVERY_MS. */
  private forgetLate(now = Date.now()): void {
    if (now - this.forgotAt < FORGET_LATE_EVERY_MS) return;
    this.forgotAt = now;
    for (const [user, jobs] of this.byUser) {
      for (const [id, { job }] of jobs) if (pastLatestStart(job.data, now)) jobs.delete(id);
      if (jobs.size === 0) this.byUser.delete(user);
    }
  }
}

/** A job this worker put off, and how many times. */
interface PutOff {
  job: Job<ExecuteJobData>;
  times: number;
}
