import { DelayedError, type Job } from 'bullmq';
import { ExecuteJobData } from '@app/contracts';
import { UserSlots } from '@app/transport';
import { HOLD_MS, PutOffJobs, userShareProcessor } from './user-share.processor';

/** A put-off job as PutOffJobs sees it: its id, its latest start, and whether it still waits. */
function jobOf(
  id: string,
  startBy: number,
  promoted: string[],
  waiting = true,
): Job<ExecuteJobData> {
  return {
    id,
    data: { startBy } as ExecuteJobData,
    promote: () => {
      if (!waiting) return Promise.reject(new Error(`Job ${id} is not in the delayed state`));
      promoted.push(id);
      return Promise.resolve();
    },
  } as unknown as Job<ExecuteJobData>;
}

describe(PutOffJobs.name, () => {
  const now = 1_000_000;

  beforeEach(() => jest.useFakeTimers({ now }));
  afterEach(() => jest.useRealTimers());

  it('forgets the jobs of a user who sent nothing more once they are past their latest start', () => {
    const jobs = new PutOffJobs();
    const promoted: string[] = [];
    // A user's burst, run in the end by another worker: nothing brings these back here.
    for (let i = 0; i < 10; i++) jobs.remember('quiet', jobOf(`q${i}`, now + 5_000, promoted));
    expect(jobs.size).toBe(10);
    jest.setSystemTime(now + 6_000);
    jobs.remember('other', jobOf('o1', now + 60_000, promoted));
    expect(jobs.size).toBe(1);
  });

  it('keeps a job until its latest start, and counts each put-off of it', () => {
    const jobs = new PutOffJobs();
    const job = jobOf('a', now + 5_000, []);
    expect(jobs.remember('u', job)).toBe(1);
    jest.setSystemTime(now + 4_000);
    expect(jobs.remember('u', job)).toBe(2);
    expect(jobs.size).toBe(1);
  });

  it('brings back the oldest job still waiting, and forgets the ones gone from the delayed set', async () => {
    const jobs = new PutOffJobs();
    const promoted: string[] = [];
    jobs.remember('u', jobOf('gone', now + 60_000, promoted, false));
    jobs.remember('u', jobOf('second', now + 60_000, promoted));
    jobs.remember('u', jobOf('third', now + 60_000, promoted));
    jobs.taken('u', 'third');
    await jobs.bringBack('u');
    expect(promoted).toEqual(['second']);
    expect(jobs.size).toBe(0);
  });
});

describe(userShareProcessor.name, () => {
  it('lends no slot past the share when the check of other users fails: the job is put off', async () => {
    const slots = new UserSlots({ interactive: 4, export: 4 }, 25);
    const ran: string[] = [];
    const delayed: string[] = [];
    const process = userShareProcessor(
      slots,
      'interactive',
      (job) => {
        ran.push(job.id!);
        return new Promise<void>(() => undefined);
      },
      { othersWaiting: () => Promise.reject(new Error('Redis is down')) },
    );
    const jobOf = (id: string) =>
      ({
        id,
        attemptsStarted: 1,
        data: { username: 'u', startBy: Date.now() + 60_000 } as ExecuteJobData,
        moveToDelayed: () => {
          delayed.push(id);
          return Promise.resolve();
        },
      }) as unknown as Job<ExecuteJobData>;
    void process(jobOf('first'), 'token');
    await expect(process(jobOf('second'), 'token')).rejects.toThrow(DelayedError);
    expect(ran).toEqual(['first']);
    expect(delayed).toEqual(['second']);
  });

  /** A lane of 4 slots, share 1, whose jobs run until `end(id)`; what ran and what was put off. */
  function lane(othersWaiting: (user: string) => Promise<boolean>) {
    const slots = new UserSlots({ interactive: 4, export: 4 }, 25);
    const ran: string[] = [];
    const delayed: string[] = [];
    /** The jobs `run` was told were taken before (held, or put off once). */
    const takenBefore: string[] = [];
    const ends = new Map<string, () => void>();
    const process = userShareProcessor(
      slots,
      'interactive',
      (job, { takenBefore: before }) => {
        ran.push(job.id!);
        if (before) takenBefore.push(job.id!);
        return new Promise<void>((resolve) => ends.set(job.id!, resolve));
      },
      { othersWaiting },
    );
    const take = (id: string, username = 'u') =>
      process(
        {
          id,
          attemptsStarted: 1,
          data: { username, startBy: Date.now() + 60_000 } as ExecuteJobData,
          moveToDelayed: () => {
            delayed.push(id);
            return Promise.resolve();
          },
        } as unknown as Job<ExecuteJobData>,
        'token',
      );
    const end = (id: string) => ends.get(id)!();
    return { take, end, ran, delayed, takenBefore };
  }

  afterEach(() => jest.useRealTimers());

  it('hands a user alone the slot its query frees, past every slot it may borrow, without a put-off', async () => {
    const { take, end, ran, delayed, takenBefore } = lane(() => Promise.resolve(false));
    const running = ['a', 'b', 'c'].map((id) => take(id));
    await Promise.resolve();
    await new Promise((resolve) => setImmediate(resolve));
    expect(ran).toEqual(['a', 'b', 'c']);
    // Every slot but one is held: the fourth job waits for one of them.
    const held = take('d');
    await new Promise((resolve) => setImmediate(resolve));
    expect(ran).toEqual(['a', 'b', 'c']);
    end('b');
    await running[1];
    await new Promise((resolve) => setImmediate(resolve));
    expect(ran).toEqual(['a', 'b', 'c', 'd']);
    expect(delayed).toEqual([]);
    // A DELETE while it was held could only ask for its cancel: run looks for one.
    expect(takenBefore).toEqual(['d']);
    end('d');
    await held;
  });

  it('puts a held job off once HOLD_MS pass with no slot freed, so that the free slot stays free', async () => {
    jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'] });
    const { take, ran, delayed } = lane(() => Promise.resolve(false));
    for (const id of ['a', 'b', 'c']) void take(id);
    const held = take('d');
    await new Promise((resolve) => setImmediate(resolve));
    // Only one job is held at a time: the next goes back to the queue at once.
    await expect(take('e')).rejects.toThrow(DelayedError);
    expect(delayed).toEqual(['e']);
    jest.advanceTimersByTime(HOLD_MS - 1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(delayed).toEqual(['e']);
    jest.advanceTimersByTime(1);
    await expect(held).rejects.toThrow(DelayedError);
    expect(delayed).toEqual(['e', 'd']);
    expect(ran).toEqual(['a', 'b', 'c']);
  });

  it("holds no job while another user's job waits: past its share, the job is put off at once", async () => {
    const { take, ran, delayed } = lane((user) => Promise.resolve(user === 'u'));
    void take('a');
    await new Promise((resolve) => setImmediate(resolve));
    await expect(take('b')).rejects.toThrow(DelayedError);
    expect(ran).toEqual(['a']);
    expect(delayed).toEqual(['b']);
  });
});
