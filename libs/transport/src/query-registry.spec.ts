import Redis from 'ioredis';
import { randomBytes, randomUUID } from 'node:crypto';
import { QueryState, okStatus, statusOf } from '@app/contracts';
import { InProcessQueryRegistry } from './in-process/in-process-query.registry';
import { QueryRecord, QueryRegistry } from './query.registry';
import { RedisKeys } from './redis.keys';
import { RedisQueryRegistry } from './redis/redis-query.registry';
import { testRedisUrl } from '@test/settings';
import { queuedRecord } from '@test/support/query-record';

/** Both registries move a query the same way: along QUERY_TRANSITIONS, the first end winning. */
const RETENTION_SECONDS = 60;

let redis: Redis;
let keys: RedisKeys;

beforeAll(() => {
  redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
  keys = new RedisKeys(`transition-spec-${randomBytes(4).toString('hex')}`);
});

afterAll(async () => {
  await redis.quit();
});

const adapters: [string, () => QueryRegistry][] = [
  ['in-process', () => new InProcessQueryRegistry(RETENTION_SECONDS)],
  ['Redis', () => new RedisQueryRegistry(redis, keys, RETENTION_SECONDS)],
];

describe.each(adapters)('%s registry transitions', (_name, make) => {
  let registry: QueryRegistry;
  let queryId: string;

  async function queued(): Promise<QueryRecord> {
    const record = queuedRecord(queryId);
    await registry.create(record);
    return record;
  }

  beforeEach(() => {
    registry = make();
    queryId = randomUUID();
  });

  it('moves a query forward with its facts, and returns it as it is then', async () => {
    const created = await queued();
    expect(await registry.transition(queryId, 'running', { startedAt: 7 })).toEqual({
      ...created,
      state: 'running',
      startedAt: 7,
    });
    await registry.transition(queryId, 'streaming', { rows: 1, bytes: 10 });
    const ended = await registry.transition(queryId, 'succeeded', {
      status: okStatus('SELECT 2'),
      rows: 2,
    });
    expect(ended).toMatchObject({ state: 'succeeded', startedAt: 7, rows: 2, bytes: 10 });
    expect(ended?.status).toEqual(okStatus('SELECT 2'));
    expect(ended?.finishedAt).toBeGreaterThanOrEqual(created.createdAt);
    expect(await registry.get(queryId)).toEqual(ended);
  });

  it.each<[QueryState, QueryState]>([
    ['running', 'queued'],
    ['streaming', 'running'],
    ['streaming', 'queued'],
  ])('does not move a query back from %s to %s', async (at, back) => {
    await queued();
    await registry.transition(queryId, at);
    expect((await registry.transition(queryId, back))?.state).toBe(at);
  });

  it('keeps the first final state, whoever ends the query after', async () => {
    await queued();
    const cancelled = statusOf('CANCELLED', 'cancelled by ann');
    const first = await registry.transition(queryId, 'cancelled', { status: cancelled });
    for (const to of ['succeeded', 'failed', 'streaming', 'running'] as const) {
      expect(
        await registry.transition(queryId, to, { status: statusOf('INTERNAL'), rows: 5 }),
      ).toEqual(first);
    }
    expect(first).toMatchObject({ state: 'cancelled', status: cancelled, rows: 0 });
  });

  it('leaves what it holds of a fact given as unknown (undefined)', async () => {
    await queued();
    await registry.transition(queryId, 'running', { startedAt: 7 });
    const ended = await registry.transition(queryId, 'cancelled', {
      status: statusOf('CANCELLED'),
      startedAt: undefined,
    });
    expect(ended).toMatchObject({ state: 'cancelled', startedAt: 7 });
  });

  it('moves a query without reading it back when asked not to', async () => {
    await queued();
    expect(await registry.transition(queryId, 'running', { startedAt: 3 }, false)).toBeUndefined();
    expect(await registry.get(queryId)).toMatchObject({ state: 'running', startedAt: 3 });
  });

  it('forgets a discarded query: gone from get and from the list, others kept', async () => {
    const kept = queuedRecord(randomUUID());
    await registry.create(kept);
    await queued();
    await registry.discard(queryId);
    expect(await registry.get(queryId)).toBeUndefined();
    const listed = (await registry.list(1000)).map((record) => record.queryId);
    expect(listed).toContain(kept.queryId);
    expect(listed).not.toContain(queryId);
    // A late transition does not bring it back.
    expect(await registry.transition(queryId, 'running')).toBeUndefined();
    expect(await registry.get(queryId)).toBeUndefined();
  });

  it('knows no query it was never told of', async () => {
    expect(await registry.transition(queryId, 'running')).toBeUndefined();
    expect(await registry.get(queryId)).toBeUndefined();
  });
});

describe('Redis registry retention', () => {
  it('keeps an ended query for the retention, an open one for a day', async () => {
    const registry = new RedisQueryRegistry(redis, keys, RETENTION_SECONDS);
    const queryId = randomUUID();
    await registry.create(queuedRecord(queryId));
    await registry.transition(queryId, 'running');
    expect(await redis.ttl(keys.meta(queryId))).toBeGreaterThan(RETENTION_SECONDS * 10);
    await registry.transition(queryId, 'failed', { status: statusOf('INTERNAL') });
    const ttl = await redis.ttl(keys.meta(queryId));
    expect(ttl).toBeGreaterThan(RETENTION_SECONDS - 5);
    expect(ttl).toBeLessThanOrEqual(RETENTION_SECONDS);
  });
});

describe.each(adapters)('%s registry idempotency keys', (_name, make) => {
  it('claims a key once per owner; a repeat gets the first claim; release frees it', async () => {
    const registry = make();
    const key = `key-${randomUUID()}`;
    const first = { queryId: randomUUID(), fingerprint: 'a' };
    expect(await registry.claimKey('ann', key, first, 60)).toBeUndefined();
    expect(
      await registry.claimKey('ann', key, { queryId: randomUUID(), fingerprint: 'b' }, 60),
    ).toEqual(first);
    // Another owner's key of the same text is another key.
    expect(
      await registry.claimKey('bob', key, { queryId: randomUUID(), fingerprint: 'a' }, 60),
    ).toBeUndefined();
    await registry.releaseKey('ann', key);
    const again = { queryId: randomUUID(), fingerprint: 'c' };
    expect(await registry.claimKey('ann', key, again, 60)).toBeUndefined();
    expect(await registry.claimKey('ann', key, first, 60)).toEqual(again);
  });

  it('lets a claim lapse after its TTL', async () => {
    const registry = make();
    const key = `key-${randomUUID()}`;
    expect(
      await registry.claimKey('ann', key, { queryId: 'q1', fingerprint: 'a' }, 1),
    ).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect(
      await registry.claimKey('ann', key, { queryId: 'q2', fingerprint: 'a' }, 1),
    ).toBeUndefined();
  });
});
