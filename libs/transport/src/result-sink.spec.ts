import Redis from 'ioredis';
import { randomBytes, randomUUID } from 'node:crypto';
import { MessageChannel } from 'node:worker_threads';
import { ResultRecord, statusOf } from '@app/contracts';
import { testRedisUrl } from '@test/settings';
import { InProcessResultChannel } from './in-process/in-process-result.channel';
import { PortResultWriter } from './in-process/port-result.writer';
import { RedisKeys } from './redis.keys';
import { RedisConnector } from './redis/redis.connector';
import { RedisResultSink } from './redis/redis-result.sink';
import { RedisResultSource } from './redis/redis-result.source';
import { RedisResultWriter } from './redis/redis-result.writer';
import {
  FlowWindow,
  ReaderHooks,
  ResultSink,
  ResultSource,
  ResultWriter,
  StopReason,
} from './result.channel';

/**
 * The ResultSink port, the same cases over both adapters: what the worker's main thread and the
 * api's cancel of a queued query need from the producer side without a writer of their own.
 * Redis runs against a real server (E2E_REDIS_URL).
 */
interface Adapter {
  sink: ResultSink;
  source: ResultSource;
  /** A running producer's writer for the query, as a task would hold it. */
  writer(queryId: string): ResultWriter;
  close(): Promise<void>;
}

const window: FlowWindow = { chunks: 8, bytes: 1 << 20, idleTimeoutMs: 5000 };
const silent: ReaderHooks = { onSilence: () => Promise.reject(new Error('producer silent')) };

function redisAdapter(): Adapter & { redis: Redis; keys: RedisKeys } {
  const redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
  const keys = new RedisKeys(`sink-spec-${randomBytes(4).toString('hex')}`);
  const source = new RedisResultSource(redis, keys, {
    connector: new RedisConnector({ mode: 'single', url: testRedisUrl }),
    silenceMs: 5000,
    ttlSeconds: 60,
  });
  return {
    redis,
    keys,
    sink: new RedisResultSink(redis, keys, 60),
    source,
    writer: (queryId) =>
      new RedisResultWriter(redis, keys, queryId, { window, ttlSeconds: 60, pollMs: 20 }),
    close: async () => {
      await source.close();
      await redis.quit();
    },
  };
}

function inProcessAdapter(): Adapter {
  const channel = new InProcessResultChannel(5000);
  return {
    sink: channel,
    source: channel,
    writer: (queryId) => {
      const { port1, port2 } = new MessageChannel();
      channel.attach(queryId, port1);
      return new PortResultWriter(port2, window);
    },
    close: () => channel.close(),
  };
}

const cancelled = (): ResultRecord => ({
  kind: 'error',
  status: statusOf('CANCELLED', 'cancelled by ann'),
});

/** Resolves with the reason a writer's watch reports, or rejects after `ms`. */
function stopped(writer: ResultWriter, ms: number): Promise<StopReason> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      unwatch();
      reject(new Error(`no stop within ${ms} ms`));
    }, ms);
    const unwatch = writer.watch((reason) => {
      clearTimeout(timer);
      resolve(reason);
    });
  });
}

describe.each([
  ['RedisResultSink', redisAdapter],
  ['InProcessResultChannel', inProcessAdapter],
])('%s as ResultSink', (_name, make: () => Adapter) => {
  let adapter: Adapter;

  beforeEach(() => {
    adapter = make();
  });

  afterEach(() => adapter.close());

  it('ends the channel of a query no writer will run: the waiting reader gets the record', async () => {
    const queryId = randomUUID();
    const reader = adapter.source.open(queryId, silent);
    const next = reader.next();
    await adapter.sink.end(queryId, cancelled());
    expect(await next).toEqual(cancelled());
    await reader.close();
  });

  it('ends the channel of a query whose writer stopped halfway', async () => {
    const queryId = randomUUID();
    const reader = adapter.source.open(queryId, silent);
    const writer = adapter.writer(queryId);
    await writer.write({ kind: 'head', columns: [], bytes: Buffer.from('h') });
    expect((await reader.next()).kind).toBe('head');
    // The task died after its head: the main thread ends what it started.
    await adapter.sink.end(queryId, { kind: 'error', status: statusOf('INTERNAL') });
    expect(await reader.next()).toEqual({ kind: 'error', status: statusOf('INTERNAL') });
    await reader.close();
  });

  it('tells whether a cancel was asked for a query', async () => {
    const queryId = randomUUID();
    // Open, as a waiting client's reader keeps it.
    const reader = adapter.source.open(queryId, silent);
    expect(await adapter.sink.cancelAsked(queryId)).toBe(false);
    await adapter.sink.cancel(queryId);
    expect(await adapter.sink.cancelAsked(queryId)).toBe(true);
    expect(await adapter.sink.cancelAsked(randomUUID())).toBe(false);
    await reader.close();
  });

  it("stops a running query's producer with 'cancelled'", async () => {
    const queryId = randomUUID();
    // An open reader: the producer's consumer is alive, so only the cancel can stop it.
    const reader = adapter.source.open(queryId, silent);
    const writer = adapter.writer(queryId);
    const stop = stopped(writer, 3000);
    await adapter.sink.cancel(queryId);
    expect(await stop).toBe('cancelled');
    await reader.close();
  });
});

describe('RedisResultSink keys', () => {
  let adapter: ReturnType<typeof redisAdapter>;

  beforeEach(() => {
    adapter = redisAdapter();
  });

  afterEach(() => adapter.close());

  it('leaves nothing behind for longer than the stream TTL', async () => {
    const queryId = randomUUID();
    await adapter.sink.end(queryId, cancelled());
    await adapter.sink.cancel(queryId);
    for (const key of [adapter.keys.out(queryId), adapter.keys.cancel(queryId)]) {
      const ttl = await adapter.redis.ttl(key);
      expect(ttl).toBeGreaterThan(50);
      expect(ttl).toBeLessThanOrEqual(60);
    }
    await adapter.redis.del(adapter.keys.out(queryId), adapter.keys.cancel(queryId));
  });

  it('rejects when Redis refuses the write, instead of reporting the query ended', async () => {
    const queryId = randomUUID();
    // A key of the wrong type makes XADD fail inside the MULTI.
    await adapter.redis.set(adapter.keys.out(queryId), 'not a stream', 'EX', 60);
    await expect(adapter.sink.end(queryId, cancelled())).rejects.toThrow(/WRONGTYPE/);
    await adapter.redis.del(adapter.keys.out(queryId));
  });
});
