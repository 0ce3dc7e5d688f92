import Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '@app/config';
import { RedisKeys, readWorkerBeat } from '@app/transport';
import { HeartbeatService } from './heartbeat.service';
import { testRedisUrl } from '@test/settings';

/** The worker's heartbeat in Redis: written while it runs, gone once it stops. */
let redis: Redis;
let keys: RedisKeys;

function heartbeat(): HeartbeatService {
  const config = loadConfig({
    REDIS_URL: testRedisUrl,
    SLUICE_KEY_PREFIX: keys.prefix,
    SLUICE_WORKER_HEARTBEAT_MS: '100',
  });
  return new HeartbeatService(config, redis);
}

beforeAll(() => {
  redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
  keys = new RedisKeys(`heartbeat-spec-${randomBytes(4).toString('hex')}`);
});

afterAll(async () => {
  await redis.del(keys.workers);
  await redis.quit();
});

describe(HeartbeatService.name, () => {
  it('beats every interval with its lanes, and removes its beat when it stops', async () => {
    const service = heartbeat();
    await service.onApplicationBootstrap();
    const first = readWorkerBeat((await redis.hget(keys.workers, service.id))!);
    expect(first.lanes).toEqual(['interactive', 'export']);
    await new Promise((resolve) => setTimeout(resolve, 350));
    expect(readWorkerBeat((await redis.hget(keys.workers, service.id))!).at).toBeGreaterThan(
      first.at,
    );
    await service.onModuleDestroy();
    expect(await redis.hget(keys.workers, service.id)).toBeNull();
  });

  it('leaves no beat behind when it stops while starting (a SIGTERM during start-up)', async () => {
    for (let i = 0; i < 20; i++) {
      const service = heartbeat();
      const starting = service.onApplicationBootstrap();
      // Stopped at a different point of the start each round: before, during or after the first beat.
      await new Promise((resolve) => setTimeout(resolve, i % 4));
      await service.onModuleDestroy();
      await starting;
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(await redis.hget(keys.workers, service.id)).toBeNull();
    }
  });
});
