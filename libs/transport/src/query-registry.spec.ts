import Redis from 'ioredis';
import { randomBytes, randomUUID } from 'node:crypto';
import { QueryState, okStatus, statusOf } from '@app/contracts';
import { InProcessQueryRegistry } from './in-process/in-process-query.registry';
import {
  IdempotencyClaim,
  QueryRecord,
  QueryRegistry,
  STATEMENT_PREVIEW_CHARS,
  recordedStatement,
} from './query.registry';
import { RedisKeys } from './redis.keys';
import { RedisKeptLedger } from './redis/redis-kept.ledger';
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

/** Every prefix a case made: their indexes and trims go at the end (records go by their TTL). */
const prefixes: RedisKeys[] = [];
const ownKeys = () => {
  const made = new RedisKeys(`retention-spec-${randomBytes(4).toString('hex')}`);
  prefixes.push(made);
  return made;
};

/** Users a case made under `keys`: their indexes, slots and keys go at the end. */
const users: string[] = [];

afterAll(async () => {
  for (const user of users) {
    await redis.del(
      keys.userKept(user),
      keys.userQueries(user),
      keys.userSlots(user),
      keys.idempotencyKeys(user),
    );
  }
  for (const made of [keys, ...prefixes]) {
    await redis.del(
      made.queries,
      made.keptOwners,
      made.userKept('ann'),
      made.userKept('bob'),
      made.userQueries('ann'),
      made.userQueries('bob'),
      made.queriesTrimLock,
      made.keptTotal,
      made.keptHeld,
      made.keptExpiry,
      made.keptByUser,
      made.keptOwner,
    );
  }
  await redis.quit();
});

const adapters: [string, () => QueryRegistry][] = [
  ['in-process', () => new InProcessQueryRegistry({ seconds: RETENTION_SECONDS, count: 1000 })],
  ['Redis', () => new RedisQueryRegistry(redis, keys, { seconds: RETENTION_SECONDS, count: 1000 })],
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

  it('moves a query without reading it back (move)', async () => {
    await queued();
    expect(await registry.move(queryId, 'running', { startedAt: 3 })).toBeUndefined();
    expect(await registry.get(queryId)).toMatchObject({ state: 'running', startedAt: 3 });
  });

  it('forgets a discarded query: gone from get and from the list, others kept', async () => {
    const kept = queuedRecord(randomUUID());
    await registry.create(kept);
    await queued();
    await registry.discard(queryId, 'ann');
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

  it('records when a query began streaming from its progress, and from its end', async () => {
    await queued();
    await registry.transition(queryId, 'running', { startedAt: 7 });
    await registry.progress(queryId, { rows: 1, bytes: 10 });
    expect((await registry.get(queryId))?.streamingAt).toBeUndefined();
    await registry.progress(queryId, { rows: 5, bytes: 50, streamingAt: 20 });
    expect(await registry.get(queryId)).toMatchObject({ streamingAt: 20, rowsProduced: 5 });
    // A report that does not say (none does before the rows come) leaves it.
    await registry.progress(queryId, { rows: 6, bytes: 60 });
    await registry.transition(queryId, 'streaming', { rows: 6, bytes: 60 });
    expect((await registry.get(queryId))?.streamingAt).toBe(20);
    const ended = await registry.transition(queryId, 'succeeded', {
      status: okStatus('SELECT 6'),
      streamingAt: 20,
    });
    expect(ended).toMatchObject({ startedAt: 7, streamingAt: 20 });
    // A late report changes no ended query.
    await registry.progress(queryId, { rows: 7, bytes: 70, streamingAt: 99 });
    expect((await registry.get(queryId))?.streamingAt).toBe(20);
  });

  it("records the streaming time of a query that ends straight from queued (its producer's end)", async () => {
    await queued();
    const ended = await registry.transition(queryId, 'succeeded', {
      status: okStatus('SELECT 1'),
      startedAt: 7,
      streamingAt: 9,
    });
    expect(ended).toMatchObject({ state: 'succeeded', startedAt: 7, streamingAt: 9 });
  });

  it('keeps a long statement whole for get, and lists its first 200 characters', async () => {
    const long = `select '${'é'.repeat(300)}' as x -- ${'🙂'.repeat(50)}`;
    const short = 'x'.repeat(STATEMENT_PREVIEW_CHARS);
    const shortId = randomUUID();
    await registry.create({ ...queuedRecord(queryId), statement: long });
    await registry.create({ ...queuedRecord(shortId), statement: short });
    await registry.transition(queryId, 'running', { startedAt: 7 });
    await registry.transition(queryId, 'succeeded', { status: okStatus('SELECT 1') });
    expect((await registry.get(queryId))?.statement).toBe(long);
    expect((await registry.get(shortId))?.statement).toBe(short);
    const listed = await registry.list(1000);
    const of = (id: string) => listed.find((record) => record.queryId === id);
    expect(of(queryId)?.statement).toBe(long.slice(0, STATEMENT_PREVIEW_CHARS));
    expect(of(shortId)?.statement).toBe(short);
  });

  it('lists a query with every fact that get gives of it', async () => {
    const record: QueryRecord = {
      ...queuedRecord(queryId),
      ownerId: 'u-1',
      role: 'analyst',
      database: 'test',
      lane: 'export',
      statement: 'select {a}',
      boundValues: 1,
      encoding: 'gzip',
      kept: true,
      traceId: '0af7651916cd43dd8448eb211c80319c',
    };
    await registry.create(record);
    await registry.transition(queryId, 'running', { startedAt: 7 });
    await registry.progress(queryId, { rows: 2, bytes: 20, streamingAt: 8 });
    await registry.transition(queryId, 'failed', { status: statusOf('INTERNAL'), rows: 1 });
    const listed = (await registry.list(1000)).find((r) => r.queryId === queryId);
    const got = await registry.get(queryId);
    expect(got).toMatchObject({
      ...record,
      rows: 1,
      streamingAt: 8,
      rowsProduced: 2,
      state: 'failed',
    });
    expect(listed).toEqual(got);
  });
});

describe(recordedStatement.name, () => {
  it('keeps a statement that fits whole', () => {
    expect(recordedStatement('select 1', 1024)).toBe('select 1');
    const fits = 'é'.repeat(512);
    expect(recordedStatement(fits, 1024)).toBe(fits);
  });

  it('cuts a longer one to its first bytes, at the end of a character', () => {
    // 'é' is two bytes, '🙂' four (two UTF-16 units): no character is ever cut in two.
    expect(recordedStatement('a'.repeat(2000), 1024)).toBe('a'.repeat(1024));
    expect(recordedStatement('aé'.repeat(400) + 'é', 1025)).toBe('aé'.repeat(341) + 'a');
    const emoji = recordedStatement('ab' + '🙂'.repeat(300), 1024);
    expect(emoji).toBe('ab' + '🙂'.repeat(255));
    expect(Buffer.byteLength(emoji)).toBeLessThanOrEqual(1024);
  });
});

describe('Redis registry retention', () => {
  it('keeps an ended query for the retention, an open one for a day', async () => {
    const registry = new RedisQueryRegistry(redis, keys, {
      seconds: RETENTION_SECONDS,
      count: 1000,
    });
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

/** A registry of its own keys, keeping the records of at most `count` finished queries. */
const retaining: [string, (count: number) => QueryRegistry][] = [
  ['in-process', (count) => new InProcessQueryRegistry({ seconds: RETENTION_SECONDS, count })],
  [
    'Redis',
    (count) => new RedisQueryRegistry(redis, ownKeys(), { seconds: RETENTION_SECONDS, count }),
  ],
];

describe.each(retaining)('%s registry retention by count', (_name, make) => {
  /** Queries created 1 ms apart, oldest first; each moved on to `to` in turn. */
  async function queries(
    registry: QueryRegistry,
    states: (QueryState | 'kept')[],
    base = Date.now() - 60_000,
    owner = 'ann',
  ): Promise<string[]> {
    const ids: string[] = [];
    for (const [i, to] of states.entries()) {
      const record = { ...queuedRecord(randomUUID(), owner), createdAt: base + i };
      if (to === 'kept') record.kept = true;
      await registry.create(record);
      if (to !== 'queued') {
        await registry.transition(record.queryId, to === 'kept' ? 'succeeded' : to);
      }
      ids.push(record.queryId);
    }
    return ids;
  }

  const listed = async (registry: QueryRegistry) =>
    (await registry.list(100_000)).map((record) => record.queryId);

  it('forgets finished queries past the newest `count`; open ones and kept results stay', async () => {
    const registry = make(3);
    const [open, kept, ...ended] = await queries(registry, [
      'running',
      'kept',
      'succeeded',
      'failed',
      'cancelled',
      'succeeded',
      'succeeded',
      'succeeded',
    ]);
    await registry.trim();
    const newest = ended.slice(-3);
    expect(await listed(registry)).toEqual([...newest.reverse(), kept, open]);
    for (const id of ended.slice(0, 3)) expect(await registry.get(id)).toBeUndefined();
    expect(await registry.get(open)).toMatchObject({ state: 'running' });
    expect(await registry.get(kept)).toMatchObject({ state: 'succeeded', kept: true });
    await registry.close();
  });

  it('goes on with the queries that came after the last trim', async () => {
    const registry = make(2);
    const first = await queries(
      registry,
      ['succeeded', 'succeeded', 'succeeded'],
      Date.now() - 60_000,
    );
    await registry.trim();
    expect(await listed(registry)).toEqual(first.slice(1).reverse());
    const next = await queries(registry, ['succeeded', 'succeeded'], Date.now() - 30_000);
    await registry.trim();
    expect(await listed(registry)).toEqual(next.reverse());
    await registry.close();
  });

  it("counts each user's queries apart: nobody's flood pushes out another's", async () => {
    const registry = make(3);
    const base = Date.now() - 60_000;
    const bobs = await queries(registry, ['succeeded', 'failed'], base, 'bob');
    const anns = await queries(registry, Array(40).fill('succeeded'), base + 10, 'ann');
    await registry.trim();
    for (const id of bobs) expect(await registry.get(id)).toMatchObject({ owner: 'bob' });
    for (const id of anns.slice(0, 37)) expect(await registry.get(id)).toBeUndefined();
    expect((await registry.list(100, 'bob')).map((r) => r.queryId)).toEqual([...bobs].reverse());
    expect((await registry.list(100, 'ann')).map((r) => r.queryId)).toEqual(
      anns.slice(37).reverse(),
    );
    await registry.close();
  });

  it("lists one user's newest `limit`, kept results among them, however many others came since", async () => {
    const registry = make(1000);
    const base = Date.now() - 60_000;
    const [open, kept, ended] = await queries(
      registry,
      ['running', 'kept', 'succeeded'],
      base,
      'bob',
    );
    await queries(registry, Array(30).fill('succeeded'), base + 10, 'ann');
    const listed = (limit: number) =>
      registry.list(limit, 'bob').then((records) => records.map((r) => r.queryId));
    expect(await listed(10)).toEqual([ended, kept, open]);
    expect(await listed(2)).toEqual([ended, kept]);
    expect((await registry.list(3)).every((r) => r.owner === 'ann')).toBe(true);
    await registry.close();
  });

  it('trims thousands at once, down to `count`', async () => {
    const registry = make(100);
    const ids = await Promise.all(
      Array.from({ length: 1_300 }, async (_, i) => {
        const record = { ...queuedRecord(randomUUID()), createdAt: Date.now() - 60_000 + i };
        await registry.create(record);
        await registry.transition(record.queryId, 'succeeded');
        return record.queryId;
      }),
    );
    await registry.trim();
    expect(await listed(registry)).toEqual(ids.slice(-100).reverse());
    await registry.close();
  });
});

/** A registry keeping at most `keptCount` finished kept results, and those results themselves. */
interface Keeping {
  registry: QueryRegistry;
  /** Makes a query's result, of `bytes`, as its writer would. */
  keep: (queryId: string, bytes: number) => Promise<void>;
  has: (queryId: string) => Promise<boolean>;
  /** Bytes all kept results hold. */
  held: () => Promise<number>;
}

const keeping: [string, (keptCount: number) => Keeping][] = [
  [
    'in-process',
    (keptCount) => {
      const results = new Map<string, number>();
      const registry = new InProcessQueryRegistry(
        { seconds: RETENTION_SECONDS, count: 1, keptCount },
        (queryId) => results.delete(queryId),
      );
      return {
        registry,
        keep: (queryId, bytes) => Promise.resolve(void results.set(queryId, bytes)),
        has: (queryId) => Promise.resolve(results.has(queryId)),
        held: () => Promise.resolve([...results.values()].reduce((a, b) => a + b, 0)),
      };
    },
  ],
  [
    'Redis',
    (keptCount) => {
      const own = ownKeys();
      const ledger = new RedisKeptLedger(redis, own);
      return {
        registry: new RedisQueryRegistry(redis, own, {
          seconds: RETENTION_SECONDS,
          count: 1,
          keptCount,
        }),
        keep: async (queryId, bytes) => {
          const caps = { total: 1_000_000, user: 1_000_000 };
          expect(
            await ledger.reserve({ queryId, owner: 'ann' }, bytes, { caps, ttlSeconds: 60 }),
          ).toBeUndefined();
          await redis.xadd(own.out(queryId), '*', 'r', 'x'.repeat(bytes));
          await redis.expire(own.out(queryId), 60);
        },
        has: async (queryId) => (await redis.exists(own.out(queryId))) === 1,
        held: () => ledger.held(),
      };
    },
  ],
];

describe.each(keeping)('%s registry retention of kept results by count', (_name, make) => {
  const tick = () => new Promise((resolve) => setTimeout(resolve, 3));

  it('forgets finished kept results past the newest `keptCount`, with their results; open ones stay', async () => {
    const { registry, keep, has, held } = make(2);
    const states: QueryState[] = ['running', 'succeeded', 'failed', 'succeeded', 'succeeded'];
    const ids: string[] = [];
    for (const [i, to] of states.entries()) {
      const record = { ...queuedRecord(randomUUID()), kept: true };
      await registry.create(record);
      await keep(record.queryId, 100 + i);
      await registry.transition(record.queryId, to);
      ids.push(record.queryId);
      await tick();
    }
    await registry.trim();
    const [open, old, failed, older, newest] = ids;
    for (const id of [old, failed]) {
      expect(await registry.get(id)).toBeUndefined();
      expect(await has(id)).toBe(false);
    }
    for (const id of [open, older, newest]) {
      expect(await registry.get(id)).toMatchObject({ kept: true });
      expect(await has(id)).toBe(true);
    }
    expect(await held()).toBe(100 + 103 + 104);
    // The open one ends last: it is among the newest by its end, and the oldest of those goes.
    // (Redis moves it to its end in one trim, and forgets past the count in the next.)
    await registry.transition(open, 'succeeded');
    await registry.trim();
    await registry.trim();
    expect(await registry.get(older)).toBeUndefined();
    expect(await has(older)).toBe(false);
    for (const id of [open, newest]) expect(await has(id)).toBe(true);
    expect(await held()).toBe(100 + 104);
    await registry.close();
  });

  it('counts no discarded query (a repeat of an idempotency key) among the kept results', async () => {
    const { registry, keep, has } = make(2);
    const ids: string[] = [];
    for (const to of ['succeeded', 'succeeded', 'discarded'] as const) {
      const record = { ...queuedRecord(randomUUID()), kept: true };
      await registry.create(record);
      if (to === 'discarded') {
        await registry.discard(record.queryId, record.owner);
      } else {
        await keep(record.queryId, 10);
        await registry.transition(record.queryId, to);
        ids.push(record.queryId);
      }
      await tick();
    }
    await registry.trim();
    for (const id of ids) expect(await has(id)).toBe(true);
    await registry.close();
  });

  it("counts each user's kept results apart: nobody's queries push out another's", async () => {
    const { registry, keep, has } = make(2);
    const made = async (owner: string) => {
      const record = { ...queuedRecord(randomUUID(), owner), kept: true };
      await registry.create(record);
      await keep(record.queryId, 10);
      await registry.transition(record.queryId, 'succeeded');
      await tick();
      return record.queryId;
    };
    const bobs = [await made('bob'), await made('bob')];
    const anns: string[] = [];
    for (let i = 0; i < 5; i++) anns.push(await made('ann'));
    await registry.trim();
    for (const id of bobs) expect(await has(id)).toBe(true);
    for (const id of anns.slice(0, 3)) expect(await has(id)).toBe(false);
    for (const id of anns.slice(3)) expect(await has(id)).toBe(true);
    await registry.close();
  });
});

describe.each<[string, () => QueryRegistry]>([
  ['in-process', () => new InProcessQueryRegistry({ seconds: 1, count: 1000 })],
  ['Redis', () => new RedisQueryRegistry(redis, keys, { seconds: 1, count: 1000 })],
])('%s registry retention by time', (_name, make) => {
  it('forgets a finished query after its retention, kept or not; an open one stays', async () => {
    const registry = make();
    const [ended, kept, open] = [randomUUID(), randomUUID(), randomUUID()];
    await registry.create(queuedRecord(ended));
    await registry.create({ ...queuedRecord(kept), kept: true });
    await registry.create(queuedRecord(open));
    await registry.transition(ended, 'succeeded');
    await registry.transition(kept, 'failed', { status: statusOf('INTERNAL') });
    await registry.transition(open, 'running');
    expect(await registry.get(ended)).toBeDefined();
    await new Promise((resolve) => setTimeout(resolve, 1300));
    expect(await registry.get(ended)).toBeUndefined();
    expect(await registry.get(kept)).toBeUndefined();
    expect(await registry.get(open)).toMatchObject({ state: 'running' });
  });
});

describe('Redis registry trim', () => {
  it("steps past a user's open queries at the bottom of their index, batch after batch", async () => {
    const own = ownKeys();
    const registry = new RedisQueryRegistry(redis, own, { seconds: RETENTION_SECONDS, count: 5 });
    const base = Date.now() - 60_000;
    const make = async (i: number, to: QueryState) => {
      const record = { ...queuedRecord(randomUUID()), createdAt: base + i };
      await registry.create(record);
      await registry.transition(record.queryId, to);
      return record.queryId;
    };
    // 250 open (more than a batch), the oldest; then 450 that ended; then the newest 5.
    const open = await Promise.all(Array.from({ length: 250 }, (_, i) => make(i, 'running')));
    const ended = await Promise.all(
      Array.from({ length: 450 }, (_, i) => make(250 + i, 'succeeded')),
    );
    const newest = await Promise.all(
      Array.from({ length: 5 }, (_, i) => make(1000 + i, 'succeeded')),
    );
    await registry.trim();
    expect(await redis.zcard(own.userQueries('ann'))).toBe(255);
    for (const id of [...ended.slice(0, 3), ...ended.slice(-3)]) {
      expect(await registry.get(id)).toBeUndefined();
    }
    for (const id of [open[0], open[249], ...newest]) expect(await registry.get(id)).toBeDefined();
    await registry.close();
  });

  it('drops hundreds of kept results past the count in batches, past open ones at the bottom', async () => {
    const own = ownKeys();
    await redis.set(own.queriesTrimLock, 'another', 'PX', 60_000);
    const retention = { seconds: RETENTION_SECONDS, count: 1, keptCount: 10 };
    const registry = new RedisQueryRegistry(redis, own, retention);
    const base = Date.now() - 60_000;
    const make = async (i: number, to: QueryState) => {
      const record = { ...queuedRecord(randomUUID()), createdAt: base + i, kept: true };
      await registry.create(record);
      await registry.transition(record.queryId, to);
      return record.queryId;
    };
    // 250 open (more than a batch), the oldest; then 450 that ended before the newest 10 began.
    const open = await Promise.all(Array.from({ length: 250 }, (_, i) => make(i, 'running')));
    const ended = await Promise.all(
      Array.from({ length: 450 }, (_, i) => make(250 + i, 'succeeded')),
    );
    // The newest 10 begin after all of those ended.
    const newest = await Promise.all(
      Array.from({ length: 10 }, (_, i) => make(Date.now() - base + 1000 + i, 'succeeded')),
    );
    await registry.trim();
    expect(await redis.zcard(own.userKept('ann'))).toBe(260);
    for (const id of [...ended.slice(0, 3), ...ended.slice(-3)]) {
      expect(await registry.get(id)).toBeUndefined();
    }
    for (const id of [open[0], open[249], ...newest]) expect(await registry.get(id)).toBeDefined();
    await registry.close();
  });

  let at = Date.now() - 60_000;
  const fill = async (registry: QueryRegistry, count: number) => {
    for (let i = 0; i < count; i++) {
      const record = { ...queuedRecord(randomUUID()), createdAt: at++ };
      await registry.create(record);
      await registry.transition(record.queryId, 'failed', { status: statusOf('INTERNAL') });
    }
  };

  it("trims a user's queries as they are created, past the count and a tenth of it", async () => {
    const own = ownKeys();
    const retention = { seconds: RETENTION_SECONDS, count: 20 };
    // Another process holds the periodic trim: the index of everyone's is not capped meanwhile.
    await redis.set(own.queriesTrimLock, 'another', 'PX', 60_000);
    const registry = new RedisQueryRegistry(redis, own, retention);
    await fill(registry, 22);
    await registry.close();
    // Within the slack (2), nothing is trimmed; the next query starts a trim.
    expect(await redis.zcard(own.userQueries('ann'))).toBe(22);
    await fill(registry, 1);
    await registry.close();
    expect(await redis.zcard(own.userQueries('ann'))).toBe(20);
    expect(await redis.zcard(own.queries)).toBe(23);
  });

  /** Runs `registry`'s trim timer (every 20 ms) for a few rounds, then stops it. */
  async function timerRounds(registry: QueryRegistry): Promise<void> {
    registry.startTrimming();
    await new Promise((resolve) => setTimeout(resolve, 120));
    await registry.close();
  }

  it("caps the index of everyone's queries on its timer, one process at a time, never in create()", async () => {
    const own = ownKeys();
    const retention = { seconds: RETENTION_SECONDS, count: 1000, trimEveryMs: 20 };
    await redis.set(own.queriesTrimLock, 'another', 'PX', 60_000);
    // Entries of a day ago, beyond any record's life, and 10,001 of the last minute.
    const dayAgo = Date.now() - 24 * 3600 * 1000 - 60_000;
    await redis.zadd(own.queries, dayAgo, 'old-1', dayAgo, 'old-2');
    const recent = Array.from({ length: 10_001 }, (_, i) => [Date.now() - 60_000 + i, `q-${i}`]);
    await redis.zadd(own.queries, ...recent.flat());
    const another = new RedisQueryRegistry(redis, own, retention);
    await fill(another, 1);
    await timerRounds(another);
    expect(await redis.zcard(own.queries)).toBe(10_004);
    // Once the lock has lapsed, a process whose timer runs trims; creating a query does not.
    await redis.del(own.queriesTrimLock);
    const next = new RedisQueryRegistry(redis, own, retention);
    await fill(next, 1);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(await redis.zcard(own.queries)).toBe(10_005);
    await timerRounds(next);
    expect(await redis.zcard(own.queries)).toBe(10_000);
    expect(await redis.zscore(own.queries, 'old-1')).toBeNull();
    expect(await redis.zscore(own.queries, 'q-10000')).not.toBeNull();
  });

  it('forgets the users who kept no result for a day, and their indexes', async () => {
    const own = ownKeys();
    const registry = new RedisQueryRegistry(redis, own, {
      seconds: RETENTION_SECONDS,
      count: 1000,
      keptCount: 5,
    });
    const dayAgo = Date.now() - 24 * 3600 * 1000 - 60_000;
    await redis.zadd(own.keptOwners, dayAgo, 'bob');
    await redis.zadd(own.userKept('bob'), dayAgo, randomUUID());
    await registry.create({ ...queuedRecord(randomUUID(), 'ann'), kept: true });
    await registry.trim();
    expect(await redis.zrange(own.keptOwners, 0, -1)).toEqual(['ann']);
    expect(await redis.exists(own.userKept('bob'))).toBe(0);
    expect(await redis.zcard(own.userKept('ann'))).toBe(1);
    await registry.close();
  });

  it('trims kept results under the same lock', async () => {
    const own = ownKeys();
    const retention = { seconds: RETENTION_SECONDS, count: 1000, keptCount: 1, trimEveryMs: 20 };
    const kept = async (registry: QueryRegistry) => {
      const record = { ...queuedRecord(randomUUID()), kept: true };
      await registry.create(record);
      await registry.transition(record.queryId, 'succeeded');
      // Each ends before the next begins, as they come one after another.
      await new Promise((resolve) => setTimeout(resolve, 3));
    };
    await redis.set(own.queriesTrimLock, 'another', 'PX', 60_000);
    // Three processes, each of which would trim on its timer but for the lock.
    for (let i = 0; i < 3; i++) {
      const another = new RedisQueryRegistry(redis, own, retention);
      await kept(another);
      await timerRounds(another);
    }
    expect(await redis.zcard(own.userKept('ann'))).toBe(3);
    await redis.del(own.queriesTrimLock);
    const third = new RedisQueryRegistry(redis, own, retention);
    await kept(third);
    await timerRounds(third);
    expect(await redis.zcard(own.userKept('ann'))).toBe(1);
  });
});

describe.each(adapters)('%s registry idempotency keys', (_name, make) => {
  const limits = { ttlSeconds: 60, most: 1000 };
  const claimed = { outcome: 'claimed' };
  const held = (claim: IdempotencyClaim) => ({ outcome: 'held', claim });

  it('claims a key once per owner; a repeat gets the first claim; release frees it', async () => {
    const registry = make();
    const key = `key-${randomUUID()}`;
    const first = { queryId: randomUUID(), fingerprint: 'a' };
    expect(await registry.claimKey({ owner: 'ann', key }, first, limits)).toEqual(claimed);
    expect(
      await registry.claimKey(
        { owner: 'ann', key },
        { queryId: randomUUID(), fingerprint: 'b' },
        limits,
      ),
    ).toEqual(held(first));
    // Another owner's key of the same text is another key.
    expect(
      await registry.claimKey(
        { owner: 'bob', key },
        { queryId: randomUUID(), fingerprint: 'a' },
        limits,
      ),
    ).toEqual(claimed);
    await registry.releaseKey({ owner: 'ann', key });
    const again = { queryId: randomUUID(), fingerprint: 'c' };
    expect(await registry.claimKey({ owner: 'ann', key }, again, limits)).toEqual(claimed);
    expect(await registry.claimKey({ owner: 'ann', key }, first, limits)).toEqual(held(again));
  });

  it('takes the claim of the query that holds the key as claimed: the same claim sent again', async () => {
    const registry = make();
    const key = `key-${randomUUID()}`;
    const claim = { queryId: randomUUID(), fingerprint: 'a' };
    expect(await registry.claimKey({ owner: 'ann', key }, claim, limits)).toEqual(claimed);
    // As ioredis sends it again after the connection dropped before the reply.
    expect(await registry.claimKey({ owner: 'ann', key }, claim, limits)).toEqual(claimed);
    expect(
      await registry.claimKey(
        { owner: 'ann', key },
        { queryId: randomUUID(), fingerprint: 'a' },
        limits,
      ),
    ).toEqual(held(claim));
  });

  it('lets a claim lapse after its TTL', async () => {
    const registry = make();
    const key = `key-${randomUUID()}`;
    const short = { ttlSeconds: 1, most: 1000 };
    expect(
      await registry.claimKey({ owner: 'ann', key }, { queryId: 'q1', fingerprint: 'a' }, short),
    ).toEqual(claimed);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect(
      await registry.claimKey({ owner: 'ann', key }, { queryId: 'q2', fingerprint: 'a' }, short),
    ).toEqual(claimed);
  });

  it("refuses an owner's new key past `most` live ones, until one lapses or is released", async () => {
    const registry = make();
    const owner = `cap-${randomUUID()}`;
    const few = { ttlSeconds: 2, most: 3 };
    const claim = (key: string) =>
      registry.claimKey({ owner, key }, { queryId: key, fingerprint: 'a' }, few);
    for (const key of ['k1', 'k2', 'k3']) expect(await claim(key)).toEqual(claimed);
    const full = await claim('k4');
    expect(full).toMatchObject({ outcome: 'full' });
    expect(full.outcome === 'full' && full.freeInMs).toBeGreaterThan(1000);
    expect(full.outcome === 'full' && full.freeInMs).toBeLessThanOrEqual(2000);
    // A repeat of a key it holds (a new request: another query) is still answered, and nobody
    // else is counted against it.
    expect(
      await registry.claimKey({ owner, key: 'k2' }, { queryId: 'k2-again', fingerprint: 'a' }, few),
    ).toEqual(held({ queryId: 'k2', fingerprint: 'a' }));
    expect(
      await registry.claimKey(
        { owner: `other-${owner}`, key: 'k4' },
        { queryId: 'k4', fingerprint: 'a' },
        few,
      ),
    ).toEqual(claimed);
    await registry.releaseKey({ owner, key: 'k1' });
    expect(await claim('k4')).toEqual(claimed);
    expect(await claim('k5')).toMatchObject({ outcome: 'full' });
    await new Promise((resolve) => setTimeout(resolve, 2100));
    for (const key of ['k5', 'k6', 'k7']) expect(await claim(key)).toEqual(claimed);
  });
});

describe.each(adapters)("%s registry: a user's queries, and forgetting a user", (_name, make) => {
  const limits = { ttlSeconds: 60, most: 1000 };

  /**
   * The owner's queries in every state that counts (ended, queued, running; each kept or not),
   * and one of another user's, kept and queued.
   */
  async function queriesIn(registry: QueryRegistry, owner: string, other: string) {
    const record = (who: string, kept = false): QueryRecord => ({
      ...queuedRecord(randomUUID(), who),
      kept: kept || undefined,
    });
    const made = {
      ended: record(owner),
      keptEnded: record(owner, true),
      queued: record(owner),
      keptQueued: record(owner, true),
      running: record(owner),
      keptRunning: record(owner, true),
      others: record(other, true),
    };
    const { ended, keptEnded, queued, keptQueued, running, keptRunning, others } = made;
    for (const r of Object.values(made)) await registry.create(r);
    for (const r of [queued, keptQueued, running, keptRunning, others]) {
      await registry.admit(r.owner, r.queryId, 10);
    }
    for (const r of [ended, keptEnded]) await registry.transition(r.queryId, 'succeeded');
    for (const r of [running, keptRunning]) await registry.transition(r.queryId, 'running');
    return made;
  }

  const ids = (records: QueryRecord[]) => records.map((r) => r.queryId).sort();

  it("forgets a deleted user's records, slots and keys; answers their open and kept queries", async () => {
    const registry = make();
    const gone = `gone-${randomUUID()}`;
    const other = `other-${randomUUID()}`;
    users.push(gone, other);
    const { others, ...mine } = await queriesIn(registry, gone, other);
    const claim = (owner: string, queryId: string) =>
      registry.claimKey({ owner, key: 'the-key' }, { queryId, fingerprint: 'a' }, limits);
    await claim(gone, mine.keptEnded.queryId);
    await claim(other, others.queryId);

    const forgotten = await registry.forgetUser(gone);

    expect([...forgotten.open].sort()).toEqual(
      ids([mine.queued, mine.keptQueued, mine.running, mine.keptRunning]),
    );
    expect([...forgotten.kept].sort()).toEqual(
      ids([mine.keptEnded, mine.keptQueued, mine.keptRunning]),
    );
    for (const r of Object.values(mine)) {
      expect(await registry.get(r.queryId)).toBeUndefined();
    }
    expect(await registry.list(100, gone)).toEqual([]);
    const everyone = await registry.list(10_000);
    expect(everyone.filter((r) => r.owner === gone)).toEqual([]);
    // A later user of the name starts afresh: the key is new to them, every slot free.
    expect(await claim(gone, 'fresh')).toEqual({ outcome: 'claimed' });
    expect(await registry.admit(gone, randomUUID(), 1)).toBe(0);
    // Nobody else's is touched.
    expect(await registry.get(others.queryId)).toMatchObject({ owner: other });
    expect(await claim(other, 'again')).toMatchObject({ outcome: 'held' });
    expect(await registry.admit(other, randomUUID(), 1)).toBeUndefined();
  });

  it('lets no query of a forgotten user make its record again as it ends', async () => {
    const registry = make();
    const gone = `gone-${randomUUID()}`;
    users.push(gone);
    const running = { ...queuedRecord(randomUUID(), gone), kept: true };
    await registry.create(running);
    await registry.transition(running.queryId, 'running');
    await registry.forgetUser(gone);
    await registry.progress(running.queryId, { rows: 1, bytes: 10 });
    expect(
      await registry.transition(running.queryId, 'succeeded', { rows: 1, bytes: 10 }),
    ).toBeUndefined();
    expect(await registry.get(running.queryId)).toBeUndefined();
    expect(await registry.list(100, gone)).toEqual([]);
  });

  it("answers a user's open queries and kept results, and forgets nothing", async () => {
    const registry = make();
    const owner = `owner-${randomUUID()}`;
    const other = `other-${randomUUID()}`;
    users.push(owner, other);
    const { others, ...mine } = await queriesIn(registry, owner, other);
    // A released slot is no open query.
    await registry.admit(owner, mine.ended.queryId, 10);
    await registry.release(owner, mine.ended.queryId);

    const queries = await registry.queriesOf(owner);

    expect([...queries.open].sort()).toEqual(
      ids([mine.queued, mine.keptQueued, mine.running, mine.keptRunning]),
    );
    expect([...queries.kept].sort()).toEqual(
      ids([mine.keptEnded, mine.keptQueued, mine.keptRunning]),
    );
    for (const r of Object.values(mine)) {
      expect(await registry.get(r.queryId)).toMatchObject({ owner });
    }
    // Each user's own, and nobody's is none.
    expect(await registry.queriesOf(other)).toEqual({
      open: [others.queryId],
      kept: [others.queryId],
    });
    expect(await registry.queriesOf(`nobody-${randomUUID()}`)).toEqual({ open: [], kept: [] });
  });

  it('answers the users who kept a result, and only them', async () => {
    const registry = make();
    const owner = `owner-${randomUUID()}`;
    const other = `other-${randomUUID()}`;
    const unkept = `unkept-${randomUUID()}`;
    users.push(owner, other, unkept);
    await queriesIn(registry, owner, other);
    await registry.create(queuedRecord(randomUUID(), unkept));

    const keeping = await registry.keptOwners();

    expect(keeping).toEqual(expect.arrayContaining([owner, other]));
    expect(keeping).not.toContain(unkept);
    expect(new Set(keeping).size).toBe(keeping.length);
  });

  it('forgets a user who has nothing', async () => {
    const registry = make();
    expect(await registry.forgetUser(`nobody-${randomUUID()}`)).toEqual({ open: [], kept: [] });
  });
});
