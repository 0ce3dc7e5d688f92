import Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '@app/config';
import { RedisKeys, workerBeat } from '@app/transport';
import { WorkerRosterService } from './worker-roster.service';
import { testRedisUrl } from '@test/settings';

/** Which workers count as alive, and for which lanes, from the heartbeats in Redis. */
let redis: Redis;
let keys: RedisKeys;
let roster: WorkerRosterService;

beforeAll(() => {
  redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
  keys = new RedisKeys(`roster-spec-${randomBytes(4).toString('hex')}`);
  const config = loadConfig({
    REDIS_URL: testRedisUrl,
    SLUICE_KEY_PREFIX: keys.prefix,
    SLUICE_WORKER_HEARTBEAT_MS: '1000',
  });
  roster = new WorkerRosterService(config, redis);
});

afterAll(async () => {
  await redis.del(keys.workers);
  await redis.quit();
});

describe(WorkerRosterService.name, () => {
  it('counts a worker alive for the lanes it serves, while its beat is fresh', async () => {
    const now = Date.now();
    await redis.hset(keys.workers, {
      both: workerBeat(now, ['interactive', 'export']),
      exporter: workerBeat(now, ['export']),
      // Three beats ago and more: gone.
      stale: workerBeat(now - 3_500, ['interactive']),
      // A worker from before lanes: a bare time, and the one queue there was.
      older: String(now),
    });
    expect((await roster.alive()).sort()).toEqual(['both', 'exporter', 'older']);
    expect((await roster.alive('export')).sort()).toEqual(['both', 'exporter']);
    expect((await roster.alive('interactive')).sort()).toEqual(['both', 'older']);
    await redis.hdel(keys.workers, 'both', 'older');
    expect(await roster.alive('interactive')).toEqual([]);
    expect(await roster.alive('export')).toEqual(['exporter']);
  });

  it('uses a read again only within the age its caller allows', async () => {
    const beat = workerBeat(Date.now(), ['interactive']);
    await redis.hset(keys.workers, 'w1', beat);
    expect(await roster.alive('interactive')).toEqual(['w1']);
    await redis.hdel(keys.workers, 'w1');
    // Within the age: the earlier read; asked fresh (readiness): Redis again.
    expect(await roster.alive('interactive', 60_000)).toEqual(['w1']);
    expect(await roster.alive('interactive')).toEqual([]);
  });
});
