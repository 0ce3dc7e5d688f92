import Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '@app/config';
import {
  InProcessJobQueue,
  InProcessQueryRegistry,
  QuerySlots,
  RedisKeys,
  RedisQueryRegistry,
} from '@app/transport';
import { testRedisUrl } from '@test/settings';
import { WorkerRosterService } from '../health/worker-roster.service';
import { AdmissionService, dispatchPriority } from './admission.service';

/** The queue-wide cap: its reading of the queue's depth, shared and briefly reused. */
const config = loadConfig({ SLUICE_MAX_QUEUED: '5' });

function admissionOver(
  queue: InProcessJobQueue,
  registry: QuerySlots = new InProcessQueryRegistry({ seconds: 60, count: 1000 }),
): AdmissionService {
  return new AdmissionService(queue, registry, config, new WorkerRosterService(config, undefined));
}

let redis: Redis;
const prefix = `admission-spec-${randomBytes(4).toString('hex')}`;
beforeAll(() => {
  redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
});
afterAll(async () => {
  const left = await redis.keys(`${prefix}*`);
  if (left.length > 0) await redis.del(...left);
  redis.disconnect();
});

/** The slots as the api keeps them: in process (standalone), or by the Redis slot script. */
const slotKeepers: [string, () => QuerySlots][] = [
  ['in-process', () => new InProcessQueryRegistry({ seconds: 60, count: 1000 })],
  [
    'Redis',
    () => new RedisQueryRegistry(redis, new RedisKeys(prefix), { seconds: 60, count: 1000 }),
  ],
];

describe(AdmissionService.name, () => {
  it('reads the queue depth once for all the requests that come while it is read', async () => {
    const queue = new InProcessJobQueue({ seconds: 60, count: 10 });
    const reads = jest.spyOn(queue, 'waitingCount');
    const admission = admissionOver(queue);
    await Promise.all(Array.from({ length: 32 }, () => admission.check('interactive')));
    expect(reads).toHaveBeenCalledTimes(1);
    await queue.close();
  });

  it('answers 429 once the queue holds SLUICE_MAX_QUEUED jobs, and reads again after a failure', async () => {
    const queue = new InProcessJobQueue({ seconds: 60, count: 10 });
    const reads = jest.spyOn(queue, 'waitingCount');
    reads.mockRejectedValueOnce(new Error('Redis is down'));
    const admission = admissionOver(queue);
    await expect(admission.check('interactive')).rejects.toThrow('Redis is down');
    // Nobody consumes: every job stays waiting.
    for (let i = 0; i < 5; i += 1) {
      await queue.enqueue({ queryId: `q${i}`, lane: 'interactive' } as never);
    }
    await expect(admission.check('interactive')).rejects.toMatchObject({ code: 'QUEUE_FULL' });
    expect(reads).toHaveBeenCalledTimes(2);
    await queue.close();
  });

  it("ranks a user's first four concurrent queries, then one class for each doubling", () => {
    const classes = Array.from({ length: 40 }, (_, i) => dispatchPriority(i + 1));
    expect(classes.slice(0, 4)).toEqual([1, 2, 3, 4]);
    expect(new Set(classes.slice(4, 8))).toEqual(new Set([5]));
    expect(new Set(classes.slice(8, 16))).toEqual(new Set([6]));
    expect(new Set(classes.slice(16, 32))).toEqual(new Set([7]));
    expect(new Set(classes.slice(32, 40))).toEqual(new Set([8]));
  });

  it.each(slotKeepers)(
    "gives a user's queries their class as their slots are taken (%s)",
    async (_name, make) => {
      const queue = new InProcessJobQueue({ seconds: 60, count: 10 });
      const admission = admissionOver(queue, make());
      const taken: number[] = [];
      for (let i = 0; i < 9; i += 1) taken.push(await admission.takeSlot('ann', `q${i}`));
      expect(taken).toEqual([1, 2, 3, 4, 5, 5, 5, 5, 6]);
      // Another user's first query goes ahead of all of them.
      expect(await admission.takeSlot('bob', 'b0')).toBe(1);
      await queue.close();
    },
  );
});
