import Redis from 'ioredis';
import { randomBytes, randomUUID } from 'node:crypto';
import { RedisKeys } from '../redis.keys';
import { RedisQueryRegistry } from './redis-query.registry';
import { testRedisUrl } from '@test/settings';

/**
 * A user's query slots against a real Redis: each is a lease that the reading api renews, so a
 * release that never happened (a Redis blip, a dead api) costs the slot for one lease, not a day.
 */
const LEASE_MS = 400;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let redis: Redis;
let keys: RedisKeys;
let registry: RedisQueryRegistry;

beforeEach(() => {
  redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
  keys = new RedisKeys(`registry-spec-${randomBytes(4).toString('hex')}`);
  registry = new RedisQueryRegistry(redis, keys, { seconds: 60, count: 1000 }, LEASE_MS);
});

afterEach(async () => {
  await redis.del(keys.userSlots('alice'));
  await redis.quit();
});

describe('RedisQueryRegistry slots', () => {
  it('counts slots up to the cap and gives them back on release', async () => {
    // Leases that outlast the case: a loaded machine once took longer than LEASE_MS between two
    // admissions, and the first slot had lapsed.
    registry = new RedisQueryRegistry(redis, keys, { seconds: 60, count: 1000 }, 60_000);
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    expect(await registry.admit('alice', a, 2)).toBe(0);
    expect(await registry.admit('alice', b, 2)).toBe(1);
    expect(await registry.admit('alice', c, 2)).toBeUndefined();
    await registry.release('alice', a);
    expect(await registry.admit('alice', c, 2)).toBe(1);
  });

  it('lets a slot that was never released lapse after its lease', async () => {
    const lost = randomUUID();
    expect(await registry.admit('alice', lost, 1)).toBe(0);
    expect(await registry.admit('alice', randomUUID(), 1)).toBeUndefined();
    await sleep(LEASE_MS + 100);
    expect(await registry.admit('alice', randomUUID(), 1)).toBe(0);
  });

  it('keeps a renewed slot past its first lease', async () => {
    const living = randomUUID();
    expect(await registry.admit('alice', living, 1)).toBe(0);
    for (let i = 0; i < 4; i++) {
      await sleep(LEASE_MS / 2);
      await registry.renew('alice', living);
    }
    expect(await registry.admit('alice', randomUUID(), 1)).toBeUndefined();
    // The key itself lives as long as its latest slot.
    expect(await redis.pttl(keys.userSlots('alice'))).toBeGreaterThan(LEASE_MS / 2);
  });

  it('does not bring a released slot back with a late renewal', async () => {
    const done = randomUUID();
    expect(await registry.admit('alice', done, 1)).toBe(0);
    await registry.release('alice', done);
    await registry.renew('alice', done);
    expect(await redis.zscore(keys.userSlots('alice'), done)).toBeNull();
    expect(await registry.admit('alice', randomUUID(), 1)).toBe(0);
  });
});

describe('RedisQueryRegistry held slots', () => {
  it('holds a slot renewed for longer than a lease, and a later short lease does not cut it', async () => {
    const [held, other] = [randomUUID(), randomUUID()];
    expect(await registry.admit('alice', held, 2)).toBe(0);
    await registry.renew('alice', held, LEASE_MS * 4);
    await sleep(LEASE_MS * 0.5);
    expect(await registry.admit('alice', other, 2)).toBe(1);
    await sleep(LEASE_MS * 1.5);
    // The short lease lapsed; the long one is still counted (the set did not expire with it).
    expect(await registry.admit('alice', randomUUID(), 1)).toBeUndefined();
    expect(await redis.zscore(keys.userSlots('alice'), held)).not.toBeNull();
    expect(await redis.zscore(keys.userSlots('alice'), other)).toBeNull();
  });
});

describe('RedisQueryRegistry progress', () => {
  it('records what a running query produced, and nothing once it ended or without a record', async () => {
    const queryId = randomUUID();
    const record = {
      queryId,
      owner: 'alice',
      state: 'queued' as const,
      format: 'json',
      statement: 'select 1',
      createdAt: Date.now(),
      rows: 0,
      bytes: 0,
    };
    try {
      await registry.create(record);
      await registry.progress(queryId, { rows: 5, bytes: 50 });
      expect((await registry.get(queryId))?.rowsProduced).toBeUndefined();
      await registry.transition(queryId, 'running');
      await registry.progress(queryId, { rows: 10, bytes: 100 });
      expect(await registry.get(queryId)).toMatchObject({
        state: 'running',
        rowsProduced: 10,
        bytesProduced: 100,
      });
      await registry.transition(queryId, 'succeeded', { rowsProduced: 12, bytesProduced: 120 });
      await registry.progress(queryId, { rows: 11, bytes: 110 });
      expect(await registry.get(queryId)).toMatchObject({ rowsProduced: 12, bytesProduced: 120 });
      const none = randomUUID();
      await registry.progress(none, { rows: 1, bytes: 1 });
      expect(await redis.exists(keys.meta(none))).toBe(0);
    } finally {
      await redis.del(keys.meta(queryId), keys.queries);
    }
  });
});
