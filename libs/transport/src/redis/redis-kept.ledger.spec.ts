import Redis from 'ioredis';
import { randomBytes, randomUUID } from 'node:crypto';
import { RedisKeys } from '../redis.keys';
import { RedisKeptLedger } from './redis-kept.ledger';
import { testRedisUrl } from '@test/settings';

/** The total of all kept results in Redis: reserved before writes, given back, reclaimed at expiry. */
let redis: Redis;
let keys: RedisKeys;
let ledger: RedisKeptLedger;

beforeEach(() => {
  redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
  keys = new RedisKeys(`ledger-spec-${randomBytes(4).toString('hex')}`);
  ledger = new RedisKeptLedger(redis, keys);
});

afterEach(async () => {
  const found = await redis.keys(`${keys.prefix}:*`);
  if (found.length > 0) await redis.del(...found);
  await redis.quit();
});

describe(RedisKeptLedger.name, () => {
  it('reserves up to the cap and refuses what would pass it, reserving nothing then', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    expect(await ledger.reserve(a, 600, 1000, 60)).toBe(true);
    expect(await ledger.reserve(b, 400, 1000, 60)).toBe(true);
    expect(await ledger.reserve(b, 1, 1000, 60)).toBe(false);
    expect(await ledger.held()).toBe(1000);
    expect(await redis.hget(keys.keptHeld, b)).toBe('400');
  });

  it('gives back what one result held, once, however often it is released', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await ledger.reserve(a, 600, 1000, 60);
    await ledger.reserve(b, 300, 1000, 60);
    await ledger.release(a);
    await ledger.release(a);
    expect(await ledger.held()).toBe(300);
    expect(await ledger.reserve(a, 700, 1000, 60)).toBe(true);
  });

  it('takes back the bytes of results whose streams have expired, before it reserves or reads', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await ledger.reserve(a, 900, 1000, 60);
    // Expired as far as the ledger knows: its expiry is in the past.
    await redis.zadd(keys.keptExpiry, Date.now() - 1, a);
    expect(await ledger.held()).toBe(0);
    expect(await redis.hexists(keys.keptHeld, a)).toBe(0);
    await ledger.reserve(b, 900, 1000, 60);
    await redis.zadd(keys.keptExpiry, Date.now() - 1, b);
    expect(await ledger.reserve(a, 1000, 1000, 60)).toBe(true);
  });

  it('moves a result’s expiry with a reservation of 0, and adds none for a result it does not hold', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await ledger.reserve(a, 10, 1000, 5);
    const first = Number(await redis.zscore(keys.keptExpiry, a));
    await ledger.reserve(a, 0, 1000, 60);
    expect(Number(await redis.zscore(keys.keptExpiry, a))).toBeGreaterThan(first + 50_000);
    await ledger.reserve(b, 0, 1000, 60);
    expect(await redis.zscore(keys.keptExpiry, b)).toBeNull();
  });

  it('keeps its keys in one hash slot of their own', () => {
    const tag = (key: string) => /\{([^}]*)\}/.exec(key)?.[1];
    expect(new Set([keys.keptTotal, keys.keptHeld, keys.keptExpiry].map(tag))).toEqual(
      new Set(['kept']),
    );
  });
});
