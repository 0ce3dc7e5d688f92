import type Redis from 'ioredis';
import { RedisKeys } from '../redis.keys';
import { RedisResultWriter } from './redis-result.writer';

/** Answers watch()'s poll (EXISTS cancel, EXISTS alive) as a cancelled query's keys would. */
function cancelledQueryRedis(): { redis: Redis; polls: () => number } {
  let polls = 0;
  const chain = {
    exists: () => chain,
    exec: () => {
      polls += 1;
      return Promise.resolve([
        [null, 1],
        [null, 1],
      ]);
    },
  };
  const redis = { multi: () => chain } as unknown as Redis;
  return { redis, polls: () => polls };
}

describe(RedisResultWriter.name, () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it.each([50, 2_000])('looks for a cancel every %i ms (SLUICE_CANCEL_POLL_MS)', async (pollMs) => {
    const { redis, polls } = cancelledQueryRedis();
    const window = { chunks: 4, bytes: 65_536, idleTimeoutMs: 60_000 };
    const writer = new RedisResultWriter(redis, new RedisKeys('t'), 'q1', {
      window,
      ttlSeconds: 60,
      pollMs,
    });
    const onStop = jest.fn();
    const unwatch = writer.watch(onStop);
    await jest.advanceTimersByTimeAsync(pollMs - 1);
    expect(polls()).toBe(0);
    await jest.advanceTimersByTimeAsync(1);
    expect(polls()).toBe(1);
    expect(onStop).toHaveBeenCalledWith('cancelled');
    unwatch();
  });
});
