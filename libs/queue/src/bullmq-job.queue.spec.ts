import { Job, Worker } from 'bullmq';
import Redis from 'ioredis';
import { randomBytes, randomUUID } from 'node:crypto';
import { EXECUTE_QUEUE, ExecuteJobData } from '@app/contracts';
import { RedisKeys, UserSlots } from '@app/transport';
import { BullmqJobQueue } from './bullmq-job.queue';
import { userShareProcessor } from './user-share.processor';
import { testRedisUrl } from '@test/settings';

/**
 * The adapter's `state()` against a real Redis and real BullMQ workers. It reads BullMQ's job lock
 * key, which BullMQ does not expose: the first test fails if a BullMQ upgrade moves that key (a
 * busy, live worker would then be reported `lost`).
 */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let redis: Redis;
let keys: RedisKeys;
let queue: BullmqJobQueue;
const workers: Worker[] = [];
const connections: Redis[] = [];

function job(): ExecuteJobData {
  return {
    queryId: randomUUID(),
    text: 'select 1',
    username: 'u',
    lane: 'interactive',
  } as ExecuteJobData;
}

/** A BullMQ worker of this test's queue; its processor runs until `release` is called. */
function worker(
  options: { lockDuration: number; skipLockRenewal?: boolean; stalledInterval?: number },
  onJob: (job: Job) => Promise<void>,
): Worker {
  const connection = new Redis(testRedisUrl, { maxRetriesPerRequest: null });
  connections.push(connection);
  const w = new Worker(EXECUTE_QUEUE, onJob, {
    connection,
    prefix: keys.bullPrefix,
    maxStalledCount: 0,
    stalledInterval: options.stalledInterval ?? 30_000,
    lockDuration: options.lockDuration,
    skipLockRenewal: options.skipLockRenewal,
  });
  // A worker whose lock lapsed fails to finish its job: expected here.
  w.on('error', () => undefined);
  workers.push(w);
  return w;
}

async function until(check: () => Promise<boolean>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms`);
    await sleep(20);
  }
}

beforeEach(() => {
  redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
  keys = new RedisKeys(`jobq-spec-${randomBytes(4).toString('hex')}`);
  queue = new BullmqJobQueue(redis.duplicate(), keys, { seconds: 60, count: 1000 });
});

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.close(true)));
  connections.splice(0).forEach((c) => c.disconnect());
  await queue.queues.interactive.obliterate({ force: true });
  await queue.queues.export.obliterate({ force: true });
  await queue.close();
  await redis.quit();
});

jest.setTimeout(20_000);

describe('BullmqJobQueue.state', () => {
  it('keeps a busy job of a live worker active past several lock durations, then completed', async () => {
    const queued = job();
    let finish!: () => void;
    const running = new Promise<void>((resolve) => (finish = resolve));
    let started = false;
    worker({ lockDuration: 400 }, async () => {
      started = true;
      await running;
    });
    expect(await queue.state(queued.queryId)).toBe('unknown');
    await queue.enqueue(queued);
    await until(() => Promise.resolve(started), 5000);
    // The lock is renewed every 200 ms and lives 400 ms: read it for three lock durations.
    const seen = new Set<string>();
    for (const end = Date.now() + 1200; Date.now() < end; await sleep(25)) {
      seen.add(await queue.state(queued.queryId));
    }
    expect([...seen]).toEqual(['active']);
    // The key state() reads is where BullMQ keeps the lock: set while the worker holds the job.
    expect(await redis.exists(`${keys.bullPrefix}:${EXECUTE_QUEUE}:${queued.queryId}:lock`)).toBe(
      1,
    );
    finish();
    await until(async () => (await queue.state(queued.queryId)) === 'completed', 5000);
  });

  it('reports a queued job as queued', async () => {
    const queued = job();
    await queue.enqueue(queued);
    expect(await queue.state(queued.queryId)).toBe('queued');
  });

  it('reports a job whose worker stopped renewing its lock as lost, with no other worker alive', async () => {
    const taken = job();
    let started = false;
    // A worker that takes the job and then, as far as Redis can tell, dies: its lock lapses.
    worker({ lockDuration: 300, skipLockRenewal: true }, async () => {
      started = true;
      await new Promise(() => undefined);
    });
    await queue.enqueue(taken);
    await until(() => Promise.resolve(started), 5000);
    expect(await queue.state(taken.queryId)).toBe('active');
    const lostAt = Date.now();
    await until(async () => (await queue.state(taken.queryId)) === 'lost', 3000);
    expect(Date.now() - lostAt).toBeLessThan(1000);
  });

  it('never hands a lost job to another worker: its stalled check fails it (maxStalledCount 0)', async () => {
    const taken = job();
    let runs = 0;
    // Every worker checks for stalled jobs as often (BullMQ skips a check while another's runs).
    const dead = worker({ lockDuration: 300, skipLockRenewal: true, stalledInterval: 200 }, () => {
      runs += 1;
      return new Promise(() => undefined);
    });
    await queue.enqueue(taken);
    await until(() => Promise.resolve(runs === 1), 5000);
    await until(async () => (await queue.state(taken.queryId)) === 'lost', 3000);
    // The dead worker takes nothing more (as if its process were gone).
    await dead.pause(true);
    worker({ lockDuration: 300, stalledInterval: 200 }, () => {
      runs += 1;
      return Promise.resolve();
    });
    await until(async () => (await queue.state(taken.queryId)) === 'failed', 5000);
    const failed = await queue.queues.interactive.getJob(taken.queryId);
    expect(failed?.failedReason).toBe('job stalled more than allowable limit');
    expect(runs).toBe(1);
  });
});

/**
 * `position()` reads how BullMQ keeps waiting jobs (its `wait` list and `prioritized` sorted set),
 * which BullMQ does not expose cheaply: these fail if a BullMQ upgrade changes that layout or the
 * order in which workers take jobs.
 */
describe('BullmqJobQueue.position', () => {
  /** Plain jobs (no priority: BullMQ's wait list) and prioritized ones, interleaved. */
  async function enqueueMixed(): Promise<string[]> {
    const ids: string[] = [];
    for (const priority of [undefined, 2, 1, undefined, 3, 1, undefined]) {
      const queued = { ...job(), priority };
      await queue.enqueue(queued);
      ids.push(queued.queryId);
    }
    return ids;
  }

  it("keeps its waiting jobs where position() reads them: BullMQ's wait list and prioritized set", async () => {
    await enqueueMixed();
    expect(await redis.type(queue.queues.interactive.keys.wait)).toBe('list');
    expect(await redis.type(queue.queues.interactive.keys.prioritized)).toBe('zset');
    expect(queue.queues.interactive.keys.wait).toBe(`${keys.bullPrefix}:${EXECUTE_QUEUE}:wait`);
  });

  it("agrees with BullMQ's own order of waiting jobs (getRanges, oldest first)", async () => {
    const ids = await enqueueMixed();
    const order = await queue.queues.interactive.getRanges(['waiting', 'prioritized'], 0, -1, true);
    expect([...order].sort()).toEqual([...ids].sort());
    for (const id of ids) expect(await queue.position(id)).toBe(order.indexOf(id));
  });

  it('gives the order in which a worker then takes the jobs', async () => {
    const ids = await enqueueMixed();
    const positions = await Promise.all(ids.map((id) => queue.position(id)));
    const expected = ids.map((id, i) => ({ id, at: positions[i]! })).sort((a, b) => a.at - b.at);
    const taken: string[] = [];
    worker({ lockDuration: 30_000 }, (j) => {
      taken.push((j.data as ExecuteJobData).queryId);
      return Promise.resolve();
    });
    await until(() => Promise.resolve(taken.length === ids.length), 5000);
    expect(taken).toEqual(expected.map((e) => e.id));
    // Plain jobs first, oldest first; then prioritized ones by priority, oldest first.
    expect(expected.map((e) => e.at)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(taken).toEqual([ids[0], ids[3], ids[6], ids[2], ids[5], ids[1], ids[4]]);
  });
});

describe('BullmqJobQueue: jobs put off while their user holds their share of the slots', () => {
  it('count as waiting, and each reads a place of its own', async () => {
    let release!: () => void;
    const running = new Promise<void>((resolve) => (release = resolve));
    // One slot for the user: of three jobs, one runs and two are put off, again and again.
    const slots = new UserSlots({ interactive: 1, export: 1 }, 100);
    const connection = new Redis(testRedisUrl, { maxRetriesPerRequest: null });
    connections.push(connection);
    const w = new Worker(
      EXECUTE_QUEUE,
      userShareProcessor(slots, 'interactive', () => running),
      { connection, prefix: keys.bullPrefix, concurrency: 3, maxStalledCount: 0 },
    );
    w.on('error', () => undefined);
    workers.push(w);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const queued = job();
      await queue.enqueue(queued);
      ids.push(queued.queryId);
    }
    const delayed = queue.queues.interactive.keys.delayed;
    let seen: { count: number; positions: (number | undefined)[] } | undefined;
    // Read while both are put off (each is taken again every 250 ms).
    await until(async () => {
      if ((await redis.zcard(delayed)) !== 2) return false;
      const count = await queue.waitingCount();
      const positions = await Promise.all(ids.map((id) => queue.position(id)));
      if ((await redis.zcard(delayed)) !== 2) return false;
      seen = { count, positions };
      return true;
    }, 5000);
    release();
    // Uncounted, they were outside SLUICE_MAX_QUEUED; and both read place 0.
    expect(seen!.count).toBe(2);
    expect(seen!.positions.filter((p) => p !== undefined).sort()).toEqual([0, 1]);
  });

  /** A worker of one slot, for one user, over userShareProcessor; `onJob` runs each job. */
  function sharedWorker(
    onJob: (job: Job<ExecuteJobData>, taken: { takenBefore: boolean }) => Promise<void>,
  ) {
    const connection = new Redis(testRedisUrl, { maxRetriesPerRequest: null });
    connections.push(connection);
    const slots = new UserSlots({ interactive: 1, export: 1 }, 100);
    const w = new Worker(EXECUTE_QUEUE, userShareProcessor(slots, 'interactive', onJob), {
      connection,
      prefix: keys.bullPrefix,
      concurrency: 2,
      maxStalledCount: 0,
    });
    w.on('error', () => undefined);
    workers.push(w);
  }

  it('tell their run that they were taken before (BullMQ counts each take), the others not', async () => {
    const [first, second] = [job(), job()];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const taken = new Map<string, boolean>();
    sharedWorker((j, { takenBefore }) => {
      taken.set(j.data.queryId, takenBefore);
      return j.data.queryId === first.queryId ? held : Promise.resolve();
    });
    await queue.enqueue(first);
    await until(() => Promise.resolve(taken.has(first.queryId)), 5000);
    await queue.enqueue(second);
    await until(async () => (await redis.zcard(queue.queues.interactive.keys.delayed)) === 1, 5000);
    release();
    await until(() => Promise.resolve(taken.has(second.queryId)), 5000);
    expect(Object.fromEntries(taken)).toEqual({ [first.queryId]: false, [second.queryId]: true });
  });

  it('are put off longer after eight times, up to 2 s: a long wait keeps Redis nearly idle', async () => {
    const [first, second] = [job(), job()];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    sharedWorker((j) => (j.data.queryId === first.queryId ? held : Promise.resolve()));
    await queue.enqueue(first);
    await queue.enqueue(second);
    await sleep(5000);
    // Eight of 250 ms (2 s), then 500, 1000 and 2000 ms: about twelve takes in 5 s (twenty at
    // 250 ms each).
    const takes = (await queue.queues.interactive.getJob(second.queryId))!.attemptsStarted;
    release();
    expect(takes).toBeGreaterThanOrEqual(10);
    expect(takes).toBeLessThanOrEqual(14);
  });
});

describe('BullmqJobQueue retention', () => {
  /** Runs `n` jobs through a queue that keeps `count` finished ones; their ids, oldest first. */
  async function runJobs(n: number, count: number, fail = false): Promise<string[]> {
    const kept = new BullmqJobQueue(redis.duplicate(), keys, { seconds: 60, count });
    const ids: string[] = [];
    let done = 0;
    worker({ lockDuration: 30_000 }, () => {
      done += 1;
      return fail ? Promise.reject(new Error('failed on purpose')) : Promise.resolve();
    });
    for (let i = 0; i < n; i += 1) {
      const queued = job();
      await kept.enqueue(queued);
      ids.push(queued.queryId);
      // One at a time: the order they finish in is the order they were added.
      await until(() => Promise.resolve(done === i + 1), 5000);
    }
    await until(async () => (await redis.llen(kept.queues.interactive.keys.active)) === 0, 5000);
    await kept.close();
    return ids;
  }

  const jobHash = (id: string) => `${keys.bullPrefix}:${EXECUTE_QUEUE}:${id}`;

  it.each([
    ['completed', false],
    ['failed', true],
  ] as const)(
    'keeps the last `count` %s jobs of a lane, and removes the older ones',
    async (state, fail) => {
      const ids = await runJobs(5, 2, fail);
      expect((await queue.counts()).interactive[state]).toBe(2);
      const states = await Promise.all(ids.map((id) => queue.state(id)));
      expect(states).toEqual(['unknown', 'unknown', 'unknown', state, state]);
      const hashes = await Promise.all(ids.map((id) => redis.exists(jobHash(id))));
      expect(hashes).toEqual([0, 0, 0, 1, 1]);
    },
  );

  it('keeps no finished job with a count of 0', async () => {
    const ids = await runJobs(2, 0);
    expect((await queue.counts()).interactive.completed).toBe(0);
    expect(await Promise.all(ids.map((id) => redis.exists(jobHash(id))))).toEqual([0, 0]);
  });
});
