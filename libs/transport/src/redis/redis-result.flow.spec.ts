import Redis from 'ioredis';
import { randomBytes, randomUUID } from 'node:crypto';
import { ResultRecord, okStatus, statusOf } from '@app/contracts';
import { testRedisUrl } from '@test/settings';
import { FlowWindow, ResultReader, ResultStreamLostError } from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { RedisConnector } from './redis.connector';
import { RedisResultSource } from './redis-result.source';
import { MULTI_APPEND_BYTES, RedisResultWriter } from './redis-result.writer';
import { RedisQueryRegistry } from './redis-query.registry';
import { RedisQueryRecords } from './redis-query.records';
import { parseRecord } from './stream.codec';
import { data, end, settledAfter, sleep, stoppedWith } from '@test/support/flow';
import { queuedRecord } from '@test/support/query-record';

/**
 * Flow control of cluster mode against a real Redis: a RedisResultWriter appends to a query's
 * stream, the source's reader takes what it reads. The reader deletes the entries it took when
 * it goes back for more (its next() after the last one it holds): only then is there room.
 */
/** Long enough for a writer's poll (backing off to 50 ms) to see what changed. */
const SETTLE_MS = 200;

const settled = (promise: Promise<unknown>) => settledAfter(promise, SETTLE_MS);

let redis: Redis;
let keys: RedisKeys;
let source: RedisResultSource;

beforeEach(async () => {
  redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
  await redis.ping();
  keys = new RedisKeys(`flow-spec-${randomBytes(4).toString('hex')}`);
  source = new RedisResultSource(redis, keys, {
    connector: new RedisConnector({ mode: 'single', url: testRedisUrl }),
    silenceMs: 5_000,
    ttlSeconds: 60,
  });
});

afterEach(async () => {
  await source.close();
  const left = await redis.keys(`${keys.prefix}*`);
  if (left.length > 0) await redis.del(...left);
  await redis.quit();
});

function open(window: Partial<FlowWindow> = {}): {
  queryId: string;
  reader: ResultReader;
  writer: RedisResultWriter;
} {
  const queryId = randomUUID();
  const reader = source.open(queryId, { onSilence: () => Promise.resolve(undefined) });
  const writer = new RedisResultWriter(redis, keys, queryId, {
    window: { chunks: 4, bytes: 1_000_000, idleTimeoutMs: 5_000, ...window },
    ttlSeconds: 60,
    pollMs: 20,
  });
  return { queryId, reader, writer };
}

describe('RedisResultWriter flow control', () => {
  it('waits while a full window of chunks is unread, and goes on when the consumer reads', async () => {
    const { reader, writer } = open({ chunks: 3 });
    for (let n = 1; n <= 3; n++) await writer.write(data(n));
    const fourth = writer.write(data(4));
    expect(await settled(fourth)).toBe(false);
    // The reader holds all three now; they are deleted when it asks for the fourth.
    for (let n = 1; n <= 3; n++) expect(await reader.next()).toMatchObject({ rows: n });
    expect(await settled(fourth)).toBe(false);
    const next = reader.next();
    expect(await settled(fourth)).toBe(true);
    expect(await next).toMatchObject({ rows: 4 });
    await reader.close();
  });

  it('waits while a full window of bytes is unread, whatever the count of chunks', async () => {
    const { reader, writer } = open({ chunks: 100, bytes: 1000 });
    await writer.write(data(1, 436));
    expect(await settled(writer.write(data(2, 436)))).toBe(true);
    const third = writer.write(data(3, 10));
    expect(await settled(third)).toBe(false);
    await reader.next();
    await reader.next();
    const next = reader.next();
    expect(await settled(third)).toBe(true);
    expect(await next).toMatchObject({ rows: 3 });
    await reader.close();
  });

  it('stops with client-idle when the consumer takes nothing for the idle timeout', async () => {
    const { reader, writer } = open({ chunks: 2, idleTimeoutMs: 300 });
    await writer.write(data(1));
    await writer.write(data(2));
    const started = Date.now();
    expect(await stoppedWith(writer.write(data(3)))).toBe('client-idle');
    const waited = Date.now() - started;
    expect(waited).toBeGreaterThanOrEqual(290);
    expect(waited).toBeLessThan(1_500);
    await reader.close();
  });

  it('does not stop a producer whose consumer keeps reading, however slowly', async () => {
    // Each read deletes the record before it: the writer gets room every 100 ms.
    const { reader, writer } = open({ chunks: 1, idleTimeoutMs: 300 });
    const writing = (async () => {
      for (let n = 1; n <= 5; n++) await writer.write(data(n));
    })();
    const rows: number[] = [];
    for (let n = 1; n <= 5; n++) {
      await sleep(100);
      const record = await reader.next();
      rows.push(record.kind === 'data' ? record.rows : -1);
    }
    await writing;
    expect(rows).toEqual([1, 2, 3, 4, 5]);
    await reader.close();
  });

  it('stops a waiting producer with cancelled when the reader cancels, and tells its watcher', async () => {
    const { reader, writer } = open({ chunks: 1 });
    const onStop = jest.fn();
    const unwatch = writer.watch(onStop);
    await writer.write(data(1));
    const waiting = writer.write(data(2));
    expect(await settled(waiting)).toBe(false);
    const started = Date.now();
    await reader.cancel();
    expect(await stoppedWith(waiting)).toBe('cancelled');
    expect(Date.now() - started).toBeLessThan(500);
    await sleep(SETTLE_MS);
    expect(onStop.mock.calls).toEqual([['cancelled']]);
    unwatch();
    // Later writes fail once written; the final record still goes.
    expect(await stoppedWith(writer.write(data(3)))).toBe('cancelled');
    await writer.write(end());
    await reader.close();
  });

  it('refuses only records it did not write: one that finds the cancel once in the stream is written, the next is refused', async () => {
    const { reader, writer } = open({ chunks: 8 });
    await writer.write(data(1));
    await reader.cancel();
    // Room in the window: nothing is asked of Redis before the append, which then finds the cancel.
    await writer.write(data(2));
    expect(await stoppedWith(writer.write(data(3)))).toBe('cancelled');
    await writer.write(end());
    const rows: number[] = [];
    for (let record = await reader.next(); record.kind !== 'end'; record = await reader.next()) {
      if (record.kind === 'data') rows.push(record.rows);
    }
    expect(rows).toEqual([1, 2]);
    await reader.close();
  });

  it('appends an entry of MULTI_APPEND_BYTES or more in a MULTI, a smaller one by the script', async () => {
    const { reader, writer } = open({ chunks: 8 });
    const multi = jest.spyOn(redis, 'multi');
    const evalsha = jest.spyOn(redis, 'evalsha');
    await writer.write(data(1, MULTI_APPEND_BYTES));
    expect([multi.mock.calls.length, evalsha.mock.calls.length]).toEqual([1, 0]);
    await writer.write(data(2, MULTI_APPEND_BYTES - 1));
    expect([multi.mock.calls.length, evalsha.mock.calls.length]).toEqual([1, 1]);
    multi.mockRestore();
    evalsha.mockRestore();
    await reader.close();
  });

  it("keeps nothing of a record once its write resolved: the caller may write over its bytes (the runner's reuse)", async () => {
    const { reader, writer } = open({ chunks: 8, bytes: 16 << 20 });
    // By the script, by the script passed by reference (ioredis's patch: 16 KiB or more), in a MULTI.
    const sizes = [100, 20_000, MULTI_APPEND_BYTES, MULTI_APPEND_BYTES + 1];
    const written = sizes.map((size, i) => Buffer.alloc(size, 0x61 + i));
    for (const [i, bytes] of written.entries()) {
      const chunk = Buffer.from(bytes);
      await writer.write({ kind: 'data', rows: i + 1, bytes: chunk });
      chunk.fill(0x7a);
    }
    for (const [i, bytes] of written.entries()) {
      const record = await reader.next();
      expect(record).toMatchObject({ kind: 'data', rows: i + 1 });
      expect(record.kind === 'data' && record.bytes.equals(bytes)).toBe(true);
    }
    await reader.close();
  });

  it('reads back the window and the cancel after large entries too (appended in a MULTI)', async () => {
    const { reader, writer } = open({ chunks: 2, bytes: 100 * MULTI_APPEND_BYTES });
    await writer.write(data(1, MULTI_APPEND_BYTES));
    await writer.write(data(2, MULTI_APPEND_BYTES));
    expect(await settled(writer.write(data(3, MULTI_APPEND_BYTES)))).toBe(false);
    await reader.cancel();
    expect(await stoppedWith(writer.write(data(4, MULTI_APPEND_BYTES)))).toBe('cancelled');
    await reader.close();
  });

  it('takes a large append that the stream already holds as written, once, and any older id as a lost stream', async () => {
    const { queryId, reader, writer } = open({ chunks: 8 });
    // A writer at the same place in the stream sends the same ids: what a resent MULTI does.
    const behind = () =>
      new RedisResultWriter(redis, keys, queryId, {
        window: { chunks: 8, bytes: 1_000_000, idleTimeoutMs: 5_000 },
        ttlSeconds: 60,
        pollMs: 20,
      });
    const again = behind();
    await writer.write(data(1, MULTI_APPEND_BYTES));
    await again.write(data(1, MULTI_APPEND_BYTES));
    await writer.write(data(2, MULTI_APPEND_BYTES));
    await again.write(data(2, MULTI_APPEND_BYTES));
    // An id the stream has passed but is not its last is not the same append: the stream is lost.
    await expect(behind().write(data(1, MULTI_APPEND_BYTES))).rejects.toBeInstanceOf(
      ResultStreamLostError,
    );
    await writer.writeFinal([data(3, MULTI_APPEND_BYTES), end()]);
    const got: ResultRecord[] = [];
    for (let record = await reader.next(); record.kind !== 'end'; record = await reader.next()) {
      got.push(record);
    }
    expect(got).toEqual([1, 2, 3].map((n) => data(n, MULTI_APPEND_BYTES)));
    await reader.close();
  });

  it('tells its watcher consumer-gone when the reader closes', async () => {
    const { reader, writer } = open();
    const onStop = jest.fn();
    writer.watch(onStop);
    await writer.write(data(1));
    await sleep(SETTLE_MS);
    expect(onStop).not.toHaveBeenCalled();
    await reader.close();
    await sleep(SETTLE_MS);
    expect(onStop.mock.calls).toEqual([['consumer-gone']]);
  });

  it('fails a waiting and every later non-final write with the reason it was interrupted for', async () => {
    const { reader, writer } = open({ chunks: 1 });
    await writer.write(data(1));
    const waiting = writer.write(data(2));
    expect(await settled(waiting)).toBe(false);
    writer.interrupt('timeout');
    writer.interrupt('shutdown');
    expect(await stoppedWith(waiting)).toBe('timeout');
    expect(await stoppedWith(writer.write(data(3)))).toBe('timeout');
    const status = statusOf('TIME_LIMIT', 'statement time limit exceeded');
    await writer.write({ kind: 'end', status, bytes: Buffer.alloc(0) });
    expect(await reader.next()).toMatchObject({ kind: 'data', rows: 1 });
    expect(await reader.next()).toMatchObject({ kind: 'end', status });
    await reader.close();
  });

  it('never makes a final record wait, however full the window', async () => {
    const { reader, writer } = open({ chunks: 1, bytes: 100, idleTimeoutMs: 60_000 });
    await writer.write(data(1));
    expect(await settled(writer.writeFinal([data(2), end()]))).toBe(true);
    expect(await settled(writer.write(end()))).toBe(true);
    expect(await settled(writer.write({ kind: 'error', status: statusOf('INTERNAL') }))).toBe(true);
    await reader.close();
  });

  it('fails a write, a wait for room and a final write as a lost stream once its Redis is gone', async () => {
    // The worker's side of a failover: it must end the query unavailable, never as internal.
    const gone = new Redis(testRedisUrl, { maxRetriesPerRequest: 0 });
    const window = { chunks: 1, bytes: 1_000_000, idleTimeoutMs: 5_000 };
    const writer = new RedisResultWriter(gone, keys, randomUUID(), {
      window,
      ttlSeconds: 60,
      pollMs: 20,
    });
    const another = new RedisResultWriter(gone, keys, randomUUID(), {
      window,
      ttlSeconds: 60,
      pollMs: 20,
    });
    await writer.write(data(1));
    gone.disconnect();
    await expect(writer.write(data(2))).rejects.toBeInstanceOf(ResultStreamLostError);
    await expect(another.write(data(1))).rejects.toBeInstanceOf(ResultStreamLostError);
    await expect(writer.writeFinal([end()])).rejects.toBeInstanceOf(ResultStreamLostError);
  });

  it('hands over records in the order written, bytes intact, through the terminal one', async () => {
    const { reader, writer } = open({ chunks: 100 });
    const head: ResultRecord = {
      kind: 'head',
      columns: [{ name: 'n', type: 'integer' }],
      bytes: Buffer.from('head'),
    };
    await writer.write(head);
    for (let n = 1; n <= 6; n++) await writer.write(data(n, n));
    await writer.writeFinal([data(7, 7), end()]);
    const got: ResultRecord[] = [];
    for (;;) {
      const record = await reader.next();
      got.push(record);
      if (record.kind === 'end') break;
    }
    // The stream codec spells out the end's abort flag.
    const last = { ...end(), abort: false };
    expect(got).toEqual([head, ...[1, 2, 3, 4, 5, 6, 7].map((n) => data(n, n)), last]);
    await reader.close();
  });
});

describe('RedisResultWriter recording the end with the last entry', () => {
  const RETENTION_SECONDS = 60;

  async function recording(): Promise<{
    queryId: string;
    registry: RedisQueryRegistry;
    writer: RedisResultWriter;
  }> {
    const queryId = randomUUID();
    const registry = new RedisQueryRegistry(redis, keys, {
      seconds: RETENTION_SECONDS,
      count: 1000,
    });
    await registry.create(queuedRecord(queryId));
    const window = { chunks: 4, bytes: 1_000_000, idleTimeoutMs: 5_000 };
    const recordEnd = registry.records.endRecorder(queryId);
    const writer = new RedisResultWriter(redis, keys, queryId, {
      window,
      ttlSeconds: 60,
      pollMs: 20,
      recordEnd,
    });
    return { queryId, registry, writer };
  }

  /** The stream's entries as the reader would decode them, without taking them. */
  async function entries(queryId: string): Promise<ResultRecord[]> {
    const raw = await redis.xrangeBuffer(keys.out(queryId), '-', '+');
    return raw.map(([, fields]) => parseRecord(fields));
  }

  it('records the end and writes the last entry in one step, with what every entry came to', async () => {
    const { queryId, registry, writer } = await recording();
    await writer.write({ kind: 'head', columns: [], bytes: Buffer.from('[') });
    await writer.write(data(3, 10));
    expect((await registry.get(queryId))?.state).toBe('queued');
    await writer.writeFinal([
      data(2, 5),
      { kind: 'end', status: okStatus(), bytes: Buffer.from('e'), startedAt: 7, streamingAt: 8 },
    ]);
    expect(writer.endRecorded).toBe(true);
    const written = await entries(queryId);
    expect(written.at(-1)).toMatchObject({
      kind: 'end',
      recorded: true,
      startedAt: 7,
      streamingAt: 8,
    });
    // Only the last entry says so: a reader that sees it need not record the end again.
    expect(written.slice(0, -1).some((e) => 'recorded' in e)).toBe(false);
    const record = await registry.get(queryId);
    expect(record).toMatchObject({
      state: 'succeeded',
      rows: 5,
      bytes: 1 + 10 + 5 + 1,
      startedAt: 7,
      streamingAt: 8,
    });
    expect(record?.status?.sql_state).toBe('00000');
    // Kept for the retention from its end, not the day an open record gets.
    const ttl = await redis.ttl(keys.meta(queryId));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(RETENTION_SECONDS);
  });

  it('records a failure written as the only entry', async () => {
    const { queryId, registry, writer } = await recording();
    await writer.write({ kind: 'error', status: statusOf('SYNTAX_ERROR') });
    expect(await entries(queryId)).toEqual([
      { kind: 'error', status: statusOf('SYNTAX_ERROR'), recorded: true },
    ]);
    expect(await registry.get(queryId)).toMatchObject({ state: 'failed', rows: 0, bytes: 0 });
  });

  it('leaves an end recorded first by someone else (a cancel) as it was', async () => {
    const { queryId, registry, writer } = await recording();
    await registry.move(queryId, 'cancelled', { status: statusOf('CANCELLED') });
    await writer.write(end());
    expect((await registry.get(queryId))?.state).toBe('cancelled');
  });

  it('records the end with the last entry on a Redis that lacks every script (sent whole)', async () => {
    const fresh = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
    try {
      const queryId = randomUUID();
      const records = new RedisQueryRecords(fresh, keys, RETENTION_SECONDS);
      await records.create(queuedRecord(queryId));
      const writer = new RedisResultWriter(fresh, keys, queryId, {
        window: { chunks: 4, bytes: 1_000_000, idleTimeoutMs: 5_000 },
        ttlSeconds: 60,
        pollMs: 20,
        recordEnd: records.endRecorder(queryId),
      });
      // As after a restart or a failover: Redis has forgotten the scripts it ran.
      await fresh.script('FLUSH');
      await writer.writeFinal([data(3, 4), end()]);
      expect(await records.get(queryId)).toMatchObject({ state: 'succeeded', rows: 3 });
      expect((await entries(queryId)).map((e) => e.kind)).toEqual(['data', 'end']);
    } finally {
      await fresh.quit();
    }
  });

  it('takes an append that the stream already holds as written, once (the same one sent again)', async () => {
    const { queryId, registry, writer } = await recording();
    await writer.writeFinal([data(2, 5), end()]);
    // A writer at the same place in the stream sends the same ids: what a resent append does.
    const again = new RedisResultWriter(redis, keys, queryId, {
      window: { chunks: 4, bytes: 1_000_000, idleTimeoutMs: 5_000 },
      ttlSeconds: 60,
      pollMs: 20,
      recordEnd: registry.records.endRecorder(queryId),
    });
    await again.writeFinal([data(2, 5), end()]);
    expect((await entries(queryId)).map((e) => e.kind)).toEqual(['data', 'end']);
    // An id the stream has passed but is not its last is not the same append: the stream is lost.
    const other = new RedisResultWriter(redis, keys, queryId, {
      window: { chunks: 4, bytes: 1_000_000, idleTimeoutMs: 5_000 },
      ttlSeconds: 60,
      pollMs: 20,
    });
    await expect(other.write(data(1, 1))).rejects.toBeInstanceOf(ResultStreamLostError);
    expect(await registry.get(queryId)).toMatchObject({ state: 'succeeded', rows: 2 });
  });

  it('records nothing, and says nothing of it, without a recorder', async () => {
    const { queryId, writer } = open();
    const registry = new RedisQueryRegistry(redis, keys, {
      seconds: RETENTION_SECONDS,
      count: 1000,
    });
    await registry.create(queuedRecord(queryId));
    await writer.write(end());
    expect(writer.endRecorded).toBe(false);
    expect((await entries(queryId))[0]).not.toHaveProperty('recorded');
    expect((await registry.get(queryId))?.state).toBe('queued');
  });
});
