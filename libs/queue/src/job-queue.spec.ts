import { QueueKeys, Worker } from 'bullmq';
import Redis from 'ioredis';
import { randomBytes, randomUUID } from 'node:crypto';
import { EXECUTE_QUEUE, ExecuteJobData, LANES, Lane } from '@app/contracts';
import { testRedisUrl } from '@test/settings';
import {
  InProcessJobQueue,
  JobCounts,
  JobQueue,
  JobState,
  OtherUsersWaiting,
  RETAINED_JOB_BYTES,
  RedisKeys,
  UserSlots,
  retainedJobData,
} from '@app/transport';
import { BullmqJobQueue } from './bullmq-job.queue';
import { userShareProcessor } from './user-share.processor';

/**
 * The JobQueue operations the api's users need (a queued query's place, the depth for metrics),
 * the same cases over both adapters; BullMQ against a real Redis (E2E_REDIS_URL) and real workers.
 */
interface Adapter {
  queue: JobQueue;
  /**
   * Starts taking jobs, `slots` at a time (default 1), of one user's at most `userSharePercent`
   * of them (default all), each handled by `onJob`.
   */
  consume(
    onJob: (queryId: string) => Promise<void>,
    share?: { slots: number; userSharePercent: number },
  ): void;
  close(): Promise<void>;
}

function bullmqAdapter(): Adapter {
  const redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
  const keys = new RedisKeys(`jobq-port-spec-${randomBytes(4).toString('hex')}`);
  const queue = new BullmqJobQueue(redis.duplicate(), keys, { seconds: 60, count: 1000 });
  let worker: Worker | undefined;
  let connection: Redis | undefined;
  return {
    queue,
    consume: (onJob, share = { slots: 1, userSharePercent: 100 }) => {
      connection = new Redis(testRedisUrl, { maxRetriesPerRequest: null });
      const slots = new UserSlots(
        { interactive: share.slots, export: share.slots },
        share.userSharePercent,
      );
      const bull = new QueueKeys(keys.bullPrefix);
      const { wait, prioritized, delayed } = bull.getKeys(EXECUTE_QUEUE);
      const waiting = new OtherUsersWaiting(connection, {
        wait,
        prioritized,
        delayed,
        jobPrefix: bull.toKey(EXECUTE_QUEUE, ''),
      });
      worker = new Worker<ExecuteJobData>(
        EXECUTE_QUEUE,
        userShareProcessor(slots, 'interactive', (job) => onJob(job.data.queryId), {
          othersWaiting: (user) => waiting.check(user),
        }),
        { connection, prefix: keys.bullPrefix, concurrency: share.slots },
      );
    },
    close: async () => {
      await worker?.close(true);
      connection?.disconnect();
      for (const lane of LANES) await queue.queues[lane].obliterate({ force: true });
      await queue.close();
      await redis.quit();
    },
  };
}

function inProcessAdapter(): Adapter {
  const queue = new InProcessJobQueue({ seconds: 60, count: 1000 });
  return {
    queue,
    consume: (onJob, share = { slots: 1, userSharePercent: 100 }) =>
      queue.consume(
        (job) => onJob(job.queryId),
        { interactive: share.slots, export: share.slots },
        share.userSharePercent,
      ),
    close: () => queue.close(),
  };
}

function job(priority: number, lane: Lane = 'interactive', username = 'u'): ExecuteJobData {
  return {
    queryId: randomUUID(),
    text: 'select 1',
    username,
    priority,
    lane,
  } as ExecuteJobData;
}

async function until(check: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The interactive lane's counts once `settled` holds, or the last ones read after 5 s. */
async function countsWhen(queue: JobQueue, settled: (counts: JobCounts) => boolean) {
  const deadline = Date.now() + 5000;
  for (;;) {
    const counts = (await queue.counts()).interactive;
    if (settled(counts) || Date.now() > deadline) return counts;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

jest.setTimeout(20_000);

describe.each([
  ['BullmqJobQueue', bullmqAdapter],
  ['InProcessJobQueue', inProcessAdapter],
])('%s as JobQueue', (_name, make: () => Adapter) => {
  let adapter: Adapter;

  beforeEach(() => {
    adapter = make();
  });

  afterEach(() => adapter.close());

  it('gives each waiting job its place: the order in which jobs are then taken', async () => {
    // Per-user fairness priorities: users' first queries (1) before their second ones (2), …
    const jobs = [2, 1, 3, 1, 2, 1].map((priority) => job(priority));
    for (const j of jobs) await adapter.queue.enqueue(j);
    const positions = await Promise.all(jobs.map((j) => adapter.queue.position(j.queryId)));
    expect([...positions].sort((a, b) => a! - b!)).toEqual([0, 1, 2, 3, 4, 5]);
    const byPosition = jobs
      .map((j, i) => ({ id: j.queryId, at: positions[i]! }))
      .sort((a, b) => a.at - b.at)
      .map((j) => j.id);
    const taken: string[] = [];
    adapter.consume((queryId) => {
      taken.push(queryId);
      return Promise.resolve();
    });
    await until(() => taken.length === jobs.length, 10_000);
    expect(taken).toEqual(byPosition);
  });

  it('has no place for a job that runs, nor for one it never had', async () => {
    const running = job(1);
    const waiting = job(1);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let started = false;
    await adapter.queue.enqueue(running);
    await adapter.queue.enqueue(waiting);
    adapter.consume(async (queryId) => {
      if (queryId !== running.queryId) return;
      started = true;
      await held;
    });
    await until(() => started, 5000);
    expect(await adapter.queue.position(running.queryId)).toBeUndefined();
    expect(await adapter.queue.position(waiting.queryId)).toBe(0);
    expect(await adapter.queue.position(randomUUID())).toBeUndefined();
    release();
  });

  it('counts waiting and running jobs, and nothing once they are done', async () => {
    const first = job(1);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let done = 0;
    for (const j of [first, job(1), job(2)]) await adapter.queue.enqueue(j);
    expect((await adapter.queue.counts()).interactive).toMatchObject({ waiting: 3, active: 0 });
    adapter.consume(async (queryId) => {
      if (queryId === first.queryId) await held;
      done += 1;
    });
    const running = await countsWhen(adapter.queue, (c) => c.active > 0);
    expect(running).toMatchObject({ waiting: 2, active: 1 });
    expect(await adapter.queue.waitingCount()).toBe(2);
    release();
    await until(() => done === 3, 5000);
    const after = await countsWhen(adapter.queue, (c) => c.active === 0);
    expect(after).toMatchObject({ waiting: 0, active: 0 });
  });

  it("lets a user alone take every slot but one, past its share; another user's job takes that one at once", async () => {
    // Four slots, half a user's: alone, A holds three; its fourth waits, B's starts at once.
    const [a1, a2, a3, a4] = [1, 2, 3, 4].map((p) => job(p, 'interactive', 'a'));
    const b1 = job(1, 'interactive', 'b');
    const release = new Map<string, () => void>();
    const started: string[] = [];
    for (const j of [a1, a2, a3, a4]) await adapter.queue.enqueue(j);
    adapter.consume(
      (queryId) => {
        started.push(queryId);
        return new Promise<void>((resolve) => release.set(queryId, resolve));
      },
      { slots: 4, userSharePercent: 50 },
    );
    await until(() => started.length === 3, 5000);
    expect(new Set(started)).toEqual(new Set([a1.queryId, a2.queryId, a3.queryId]));
    // A's fourth waits, and still has a place and a state that say so (on Redis, but for the
    // moments when a worker takes it to put it off again).
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(started).not.toContain(a4.queryId);
    let seen: [JobState, number | undefined] | undefined;
    for (let i = 0; i < 5 && (seen?.[0] !== 'queued' || seen[1] !== 0); i++) {
      seen = [await adapter.queue.state(a4.queryId), await adapter.queue.position(a4.queryId)];
    }
    expect(seen).toEqual(['queued', 0]);
    await adapter.queue.enqueue(b1);
    await until(() => started.includes(b1.queryId), 2000);
    release.get(a1.queryId)!();
    await until(() => started.includes(a4.queryId), 5000);
    for (const done of release.values()) done();
  });

  it("holds a user to its share while another user's job waits for a slot", async () => {
    // Five slots, two a user's: A and B hold two each; A's third and B's third wait beside the
    // free slot, neither borrowing it while the other waits.
    const [a1, a2, b1, b2, a3, b3] = [
      job(1, 'interactive', 'a'),
      job(2, 'interactive', 'a'),
      job(3, 'interactive', 'b'),
      job(4, 'interactive', 'b'),
      job(5, 'interactive', 'a'),
      job(6, 'interactive', 'b'),
    ];
    const release = new Map<string, () => void>();
    const started: string[] = [];
    for (const j of [a1, a2, b1, b2, a3, b3]) await adapter.queue.enqueue(j);
    adapter.consume(
      (queryId) => {
        started.push(queryId);
        return new Promise<void>((resolve) => release.set(queryId, resolve));
      },
      { slots: 5, userSharePercent: 40 },
    );
    await until(() => started.length === 4, 5000);
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(new Set(started)).toEqual(new Set([a1.queryId, a2.queryId, b1.queryId, b2.queryId]));
    // One of B's ends: B's third takes its slot, and A's third, alone waiting now, the free one.
    release.get(b1.queryId)!();
    await until(() => started.includes(b3.queryId) && started.includes(a3.queryId), 5000);
    for (const done of release.values()) done();
  });

  it("starts a user's waiting job as soon as one of its own ends, the oldest first", async () => {
    // Two slots, one a user's: a2 and a3 wait for a1, then a2 for… a3 for a2.
    const [a1, a2, a3] = [1, 2, 3].map((p) => job(p, 'interactive', 'a'));
    const started = new Map<string, number>();
    const release = new Map<string, () => void>();
    for (const j of [a1, a2, a3]) await adapter.queue.enqueue(j);
    adapter.consume(
      (queryId) => {
        started.set(queryId, performance.now());
        return new Promise<void>((resolve) => release.set(queryId, resolve));
      },
      { slots: 2, userSharePercent: 50 },
    );
    await until(() => started.has(a1.queryId), 5000);
    // Both put off (on Redis) by now.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const ended = performance.now();
    release.get(a1.queryId)!();
    await until(() => started.size === 2, 5000);
    // At once, not after the put-off (PUT_OFF_MS, 250 ms); a2, put off first, before a3.
    expect(started.get(a2.queryId)! - ended).toBeLessThan(150);
    release.get(a2.queryId)!();
    await until(() => started.has(a3.queryId), 5000);
    release.get(a3.queryId)!();
  });

  it("lets a job past its latest start through its user's held share: it is only ended", async () => {
    const held = job(1, 'interactive', 'a');
    const late = { ...job(2, 'interactive', 'a'), startBy: Date.now() - 1 };
    const started: string[] = [];
    let release!: () => void;
    const holding = new Promise<void>((resolve) => (release = resolve));
    for (const j of [held, late]) await adapter.queue.enqueue(j);
    adapter.consume(
      (queryId) => {
        started.push(queryId);
        return queryId === held.queryId ? holding : Promise.resolve();
      },
      { slots: 2, userSharePercent: 50 },
    );
    await until(() => started.length === 2, 5000);
    expect(started).toEqual([held.queryId, late.queryId]);
    release();
  });

  it('keeps the lanes apart: places and counts by lane, state and removal across them', async () => {
    const exported = [job(1, 'export'), job(1, 'export')];
    const interactive = job(2);
    for (const j of [...exported, interactive]) await adapter.queue.enqueue(j);
    // Export jobs are never ahead of an interactive one, whatever their priority.
    expect(await adapter.queue.position(interactive.queryId)).toBe(0);
    expect(await adapter.queue.position(exported[1].queryId)).toBe(1);
    const counts = await adapter.queue.counts();
    expect(counts.interactive).toMatchObject({ waiting: 1, active: 0 });
    expect(counts.export).toMatchObject({ waiting: 2, active: 0 });
    expect(await adapter.queue.waitingCount()).toBe(3);
    expect(await adapter.queue.state(exported[0].queryId)).toBe('queued');
    expect(await adapter.queue.removeQueued(exported[0].queryId)).toBe(true);
    expect(await adapter.queue.position(exported[1].queryId)).toBe(0);
    expect((await adapter.queue.counts()).export).toMatchObject({ waiting: 1 });
  });

  it('names every job waiting or running, in both lanes, and none once it is done', async () => {
    const running = job(1);
    const waiting = [job(1), job(2, 'export')];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let started = false;
    for (const j of [running, ...waiting]) await adapter.queue.enqueue(j);
    // Every job is held until released: one slot a lane, so the second interactive one waits.
    adapter.consume(async (queryId) => {
      if (queryId === running.queryId) started = true;
      await held;
    });
    await until(() => started, 5000);
    const all = [running, ...waiting].map((j) => j.queryId).sort();
    expect((await adapter.queue.openIds(10)).sort()).toEqual(all);
    expect(await adapter.queue.openIds(2)).toHaveLength(2);
    expect(await adapter.queue.openIds(0)).toEqual([]);
    release();
    // Only the interactive lane is worked in both adapters' consume (BullMQ's): those end.
    const done = [running.queryId, waiting[0].queryId];
    const deadline = Date.now() + 5000;
    let open = await adapter.queue.openIds(10);
    while (open.some((id) => done.includes(id)) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      open = await adapter.queue.openIds(10);
    }
    expect(open.filter((id) => done.includes(id))).toEqual([]);
  });
});

describe(OtherUsersWaiting.name, () => {
  it("tells another user's waiting job by its name alone: a job's data, whose statement may be megabytes, is never decoded", async () => {
    const redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
    const keys = new RedisKeys(`test-waiting-${randomBytes(4).toString('hex')}`);
    const queue = new BullmqJobQueue(redis.duplicate(), keys, { seconds: 60, count: 1000 });
    try {
      const bull = new QueueKeys(keys.bullPrefix);
      const { wait, prioritized, delayed } = bull.getKeys(EXECUTE_QUEUE);
      const jobPrefix = bull.toKey(EXECUTE_QUEUE, '');
      const waiting = new OtherUsersWaiting(redis, { wait, prioritized, delayed, jobPrefix });
      expect(await waiting.check('alice')).toBe(false);
      const bobs = job(2, 'interactive', 'bob');
      await queue.enqueue(bobs);
      // Data no JSON decoder reads: the check goes by the job's name, its user's.
      await redis.hset(`${jobPrefix}${bobs.queryId}`, 'data', '{"username":"alice"');
      expect(await waiting.check('alice')).toBe(true);
      expect(await waiting.check('bob')).toBe(false);
    } finally {
      await queue.queues.interactive.obliterate({ force: true });
      await queue.close();
      await redis.quit();
    }
  });
});

describe(retainedJobData.name, () => {
  it('keeps a small statement and its values as they were sent', () => {
    const small = { ...job(1), text: 'select $1', values: ['x'.repeat(100)], types: [25] };
    expect(retainedJobData(small)).toBeUndefined();
  });

  it('cuts a statement past the bound, and drops its values', () => {
    const large = { ...job(1), text: `select 1 -- ${'y'.repeat(100_000)}`, values: ['v'] };
    const kept = retainedJobData(large)!;
    expect(kept.text.length).toBeLessThan(1_100);
    expect(kept.text).toMatch(/^select 1 -- y+… \(100012 characters, cut once run\)$/);
    expect(kept.values).toEqual([]);
    expect(kept).toMatchObject({ queryId: large.queryId, username: large.username });
    expect(Buffer.byteLength(JSON.stringify(kept))).toBeLessThan(RETAINED_JOB_BYTES);
  });

  it('counts the values too: large bind values are dropped', () => {
    const values = ['z'.repeat(RETAINED_JOB_BYTES)];
    const kept = retainedJobData({ ...job(1), text: 'select $1', values, types: [25] })!;
    expect(kept.values).toEqual([]);
    expect(kept.text).toMatch(/^select \$1… \(9 characters, cut once run\)$/);
  });
});
