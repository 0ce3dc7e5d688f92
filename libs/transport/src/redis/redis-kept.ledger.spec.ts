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

/** Caps of `total` for all kept results and, unless given, as much for each user. */
const caps = (total: number, user = total) => ({ total, user });
/** `owner`'s kept result of query `queryId`. */
const of = (queryId: string, owner: string) => ({ queryId, owner });
/** The caps, and a result kept `ttlSeconds` (60 unless given). */
const terms = (kept: { total: number; user: number }, ttlSeconds = 60) => ({
  caps: kept,
  ttlSeconds,
});

describe(RedisKeptLedger.name, () => {
  it('reserves up to the cap and refuses what would pass it, reserving nothing then', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    expect(await ledger.reserve(of(a, 'ann'), 600, terms(caps(1000)))).toBeUndefined();
    expect(await ledger.reserve(of(b, 'bob'), 400, terms(caps(1000)))).toBeUndefined();
    expect(await ledger.reserve(of(b, 'bob'), 401, terms(caps(1000)))).toBe('kept-full');
    expect(await ledger.held()).toBe(1000);
    expect(await redis.hget(keys.keptHeld, b)).toBe('400');
  });

  it("refuses what would take a user's results past their cap, whatever the total has left", async () => {
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    expect(await ledger.reserve(of(a, 'ann'), 300, terms(caps(1000, 500)))).toBeUndefined();
    expect(await ledger.reserve(of(b, 'ann'), 200, terms(caps(1000, 500)))).toBeUndefined();
    expect(await ledger.reserve(of(b, 'ann'), 201, terms(caps(1000, 500)))).toBe('kept-user-full');
    // Another user's share is their own.
    expect(await ledger.reserve(of(c, 'bob'), 500, terms(caps(1000, 500)))).toBeUndefined();
    expect(await ledger.held()).toBe(1000);
    expect(await redis.hgetall(keys.keptByUser)).toEqual({ ann: '500', bob: '500' });
  });

  it('gives back what one result held, once, however often it is released — to its user too', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await ledger.reserve(of(a, 'ann'), 600, terms(caps(1000)));
    await ledger.reserve(of(b, 'ann'), 300, terms(caps(1000)));
    await ledger.release(a);
    await ledger.release(a);
    expect(await ledger.held()).toBe(300);
    expect(await redis.hget(keys.keptByUser, 'ann')).toBe('300');
    expect(await ledger.reserve(of(a, 'ann'), 700, terms(caps(1000, 1000)))).toBeUndefined();
    await ledger.release(a);
    await ledger.release(b);
    // Nothing kept: neither the user's count nor the results' owners stay.
    expect(await redis.exists(keys.keptByUser, keys.keptOwner)).toBe(0);
  });

  it('takes back the bytes of results whose streams have expired, before it reserves or reads', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await ledger.reserve(of(a, 'ann'), 900, terms(caps(1000)));
    // Expired as far as the ledger knows: its expiry is in the past.
    await redis.zadd(keys.keptExpiry, Date.now() - 1, a);
    expect(await ledger.held()).toBe(0);
    expect(await redis.hexists(keys.keptHeld, a)).toBe(0);
    expect(await redis.hexists(keys.keptByUser, 'ann')).toBe(0);
    await ledger.reserve(of(b, 'ann'), 900, terms(caps(1000, 900)));
    await redis.zadd(keys.keptExpiry, Date.now() - 1, b);
    expect(await ledger.reserve(of(a, 'ann'), 900, terms(caps(1000, 900)))).toBeUndefined();
  });

  it('moves a result’s expiry with a reservation of what it holds, and adds none for a result it does not hold', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await ledger.reserve(of(a, 'ann'), 10, terms(caps(1000), 5));
    const first = Number(await redis.zscore(keys.keptExpiry, a));
    await ledger.reserve(of(a, 'ann'), 10, terms(caps(1000)));
    expect(await ledger.held()).toBe(10);
    expect(Number(await redis.zscore(keys.keptExpiry, a))).toBeGreaterThan(first + 50_000);
    await ledger.reserve(of(b, 'ann'), 0, terms(caps(1000)));
    expect(await redis.zscore(keys.keptExpiry, b)).toBeNull();
  });

  it('counts a reservation run twice once, as when ioredis sends it again after a lost reply', async () => {
    const a = randomUUID();
    const budget = ledger.budget(of(a, 'ann'), terms(caps(1000, 5000)));
    expect(await budget.take(300)).toBeUndefined();
    // What ioredis sends again: the same command, the result's total after it.
    expect(await ledger.reserve(of(a, 'ann'), 300, terms(caps(1000, 5000)))).toBeUndefined();
    expect(await budget.take(200)).toBeUndefined();
    expect(await ledger.reserve(of(a, 'ann'), 500, terms(caps(1000, 5000)))).toBeUndefined();
    expect(await ledger.held()).toBe(500);
    expect(await redis.hget(keys.keptByUser, 'ann')).toBe('500');
    expect(await budget.take(501)).toBe('kept-full');
    // A refused take leaves what the result holds as it was.
    expect(await budget.take(500)).toBeUndefined();
    expect(await ledger.held()).toBe(1000);
  });

  it('keeps its keys in one hash slot of their own', () => {
    const tag = (key: string) => /\{([^}]*)\}/.exec(key)?.[1];
    const all = [keys.keptTotal, keys.keptHeld, keys.keptExpiry, keys.keptByUser, keys.keptOwner];
    expect(new Set(all.map(tag))).toEqual(new Set(['kept']));
  });
});
