import Redis from 'ioredis';
import { randomBytes, randomUUID } from 'node:crypto';
import { ResultRecord, okStatus } from '@app/contracts';
import { ReaderClosedError } from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { RedisConnector } from './redis.connector';
import { RedisResultSource } from './redis-result.source';
import { recordFields } from './stream.codec';
import { testRedisUrl } from '@test/settings';

/** Kept results in Redis: read from the first record by any number of readers, never taken away. */
let shared: Redis;
let keys: RedisKeys;
let source: RedisResultSource;
const quiet = { onSilence: () => Promise.resolve(undefined) };

beforeAll(() => {
  shared = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
  keys = new RedisKeys(`kept-spec-${randomBytes(4).toString('hex')}`);
  source = new RedisResultSource(shared, keys, {
    connector: new RedisConnector({ mode: 'single', url: testRedisUrl }),
    silenceMs: 5000,
    ttlSeconds: 60,
  });
});

afterAll(async () => {
  await source.close();
  const found = await shared.keys(`${keys.prefix}:*`);
  if (found.length > 0) await shared.del(...found);
  await shared.quit();
});

async function write(queryId: string, record: ResultRecord): Promise<void> {
  await shared.xadd(keys.out(queryId), '*', ...recordFields(record));
}

describe('RedisKeptReader', () => {
  it('reads from the first record, deletes nothing, and serves a second reader the same', async () => {
    const queryId = randomUUID();
    await write(queryId, { kind: 'head', columns: [], bytes: Buffer.from('h') });
    const first = source.openKept(queryId, quiet);
    expect((await first.next()).kind).toBe('head');
    // A record written while it waits comes to it.
    const waiting = first.next();
    await write(queryId, { kind: 'end', status: okStatus(), bytes: Buffer.from('e') });
    expect((await waiting).kind).toBe('end');
    await first.close();
    expect(await shared.xlen(keys.out(queryId))).toBe(2);
    expect(await source.kept(queryId)).toBe(true);
    const second = source.openKept(queryId, quiet);
    expect((await second.next()).kind).toBe('head');
    expect((await second.next()).kind).toBe('end');
    await second.close();
    await source.dropKept(queryId);
    expect(await source.kept(queryId)).toBe(false);
  });

  it('stops a pending read at close, and lets go of its connection and its place in the source', async () => {
    const queryId = randomUUID();
    const before = source.stats.open;
    const reader = source.openKept(queryId, quiet);
    expect(source.stats.open).toBe(before + 1);
    const pending = reader.next();
    await reader.close();
    await expect(pending).rejects.toBeInstanceOf(ReaderClosedError);
    expect(source.stats.open).toBe(before);
    await expect(reader.next()).rejects.toBeInstanceOf(ReaderClosedError);
  });
});
