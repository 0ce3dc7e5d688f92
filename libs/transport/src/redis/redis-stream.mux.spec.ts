import Redis from 'ioredis';
import type { Socket } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import { ResultRecord } from '@app/contracts';
import { testRedisUrl } from '@test/settings';
import { data, end, settledAfter, sleep } from '@test/support/flow';
import { CommandLog, logCommands } from '@test/support/monitor';
import { FlowWindow, ReaderClosedError, ReaderHooks, ResultReader } from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { RedisClient, RedisConnector } from './redis.connector';
import { RedisResultSource } from './redis-result.source';
import { RedisResultWriter } from './redis-result.writer';
import { BULK_BYTES, RedisStreamMux } from './redis-stream.mux';

/**
 * One api process reads the result streams of all its queries over one blocking connection,
 * against a real Redis: one XREAD over the streams whose readers wait, each stream in order, none
 * read for a reader that is not reading, and new demand served at once rather than after the
 * XREAD's block timeout (which is long here, so that only a wake can explain a quick answer).
 */
const BLOCK_MS = 5000;

let redis: Redis;
let connector: RedisConnector;
let keys: RedisKeys;
let source: RedisResultSource;
let monitor: CommandLog | undefined;

beforeEach(async () => {
  redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
  await redis.ping();
  keys = new RedisKeys(`mux-spec-${randomBytes(4).toString('hex')}`);
  connector = new RedisConnector({ mode: 'single', url: testRedisUrl });
  source = new RedisResultSource(redis, keys, {
    connector,
    silenceMs: 30_000,
    ttlSeconds: 60,
    blockMs: BLOCK_MS,
  });
});

afterEach(async () => {
  monitor?.stop();
  monitor = undefined;
  await source.close();
  const left = await redis.keys(`${keys.prefix}*`);
  if (left.length > 0) await redis.del(...left);
  await redis.quit();
});

const quiet: ReaderHooks = { onSilence: () => Promise.resolve(undefined) };

function open(hooks: ReaderHooks = quiet): { queryId: string; reader: ResultReader } {
  const queryId = randomUUID();
  return { queryId, reader: source.open(queryId, hooks) };
}

function writer(queryId: string, window: Partial<FlowWindow> = {}): RedisResultWriter {
  const full = { chunks: 4, bytes: 1_000_000, idleTimeoutMs: 30_000, ...window };
  return new RedisResultWriter(redis, keys, queryId, { window: full, ttlSeconds: 60, pollMs: 20 });
}

/** The source's blocking connections as Redis sees them: ids, and how many block in a command. */
async function readerClients(): Promise<{ ids: string[]; blocked: number }> {
  const list = (await redis.client('LIST')) as string;
  const mine = list.split('\n').filter((line) => line.includes(` name=${source.connectionName} `));
  return {
    ids: mine.map((line) => /^id=(\d+) /.exec(line)![1]),
    blocked: mine.filter((line) => / flags=\S*b/.test(line)).length,
  };
}

async function until(check: () => Promise<boolean> | boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms`);
    await sleep(5);
  }
}

/** Every command Redis receives from now on, as its argument list. */
async function watchCommands(): Promise<string[][]> {
  const log = await logCommands(redis);
  monitor = log;
  return log.commands;
}

/** An XREAD of this test's (other specs run alongside, on the same Redis). */
const isXread = ([name, ...args]: string[]) =>
  name.toLowerCase() === 'xread' && args.some((a) => a.startsWith(`${keys.prefix}:`));

/** The stream keys an XREAD's arguments name (after STREAMS, the first half). */
function streamsOf(args: string[]): string[] {
  const from = args.findIndex((a) => a.toUpperCase() === 'STREAMS') + 1;
  return args.slice(from, from + (args.length - from) / 2);
}

/** Reads a reader to its end record; the rows of its data records in the order they came. */
async function readAll(reader: ResultReader): Promise<number[]> {
  const rows: number[] = [];
  for (;;) {
    const record: ResultRecord = await reader.next();
    if (record.kind === 'data') rows.push(record.rows);
    else if (record.kind === 'end') return rows;
    else throw new Error(`unexpected ${record.kind}`);
  }
}

describe(RedisStreamMux.name, () => {
  it('serves 50 readers on 50 streams over one blocking connection, each stream in order', async () => {
    const commands = await watchCommands();
    const opened = Array.from({ length: 50 }, () => open());
    const reading = opened.map(({ reader }) => readAll(reader));
    await until(() => source.stats.waiting === 50, 2000);
    await until(async () => (await readerClients()).blocked === 1, 2000);
    expect((await readerClients()).ids).toHaveLength(1);
    // One XREAD reads for all of them.
    const outs = opened.map(({ queryId }) => keys.out(queryId));
    const all = (c: string[]) => isXread(c) && streamsOf(c).length === 51;
    await until(() => commands.some(all), 2000);
    expect(streamsOf(commands.find(all)!).slice(1).sort()).toEqual(outs.sort());
    // Each producer writes 20 chunks through a window of 4, all at once.
    await Promise.all(
      opened.map(async ({ queryId }) => {
        const w = writer(queryId);
        for (let n = 1; n <= 20; n++) await w.write(data(n));
        await w.write(end());
      }),
    );
    const rows = await Promise.all(reading);
    for (const got of rows) expect(got).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect((await readerClients()).ids).toHaveLength(1);
    expect(source.stats).toEqual({ open: 50, connections: 1, waiting: 0 });
    await Promise.all(opened.map(({ reader }) => reader.close()));
    expect(source.stats).toEqual({ open: 0, connections: 1, waiting: 0 });
  });

  it('does not read for a reader that is not reading: its stream keeps its entries and its producer waits', async () => {
    const slow = open();
    const slowWriter = writer(slow.queryId, { chunks: 2 });
    await slowWriter.write(data(1));
    await slowWriter.write(data(2));
    // One read takes both; the reader hands out the first and keeps the second.
    expect(await slow.reader.next()).toMatchObject({ rows: 1 });
    const third = slowWriter.write(data(3));
    const commands = await watchCommands();
    // Meanwhile another reader reads a whole result through the mux.
    const busy = open();
    const busyRows = readAll(busy.reader);
    const busyWriter = writer(busy.queryId, { chunks: 1 });
    for (let n = 1; n <= 10; n++) await busyWriter.write(data(n));
    await busyWriter.write(end());
    expect(await busyRows).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(commands.filter(isXread).length).toBeGreaterThanOrEqual(10);
    const slowKey = keys.out(slow.queryId);
    expect(commands.filter((c) => isXread(c) && streamsOf(c).includes(slowKey))).toEqual([]);
    // Nothing it took was deleted: the producer's window is still full.
    expect(await redis.xlen(slowKey)).toBe(2);
    expect(await settledAfter(third, 100)).toBe(false);
    // The buffered record needs no read; the one after it deletes what was taken first.
    expect(await slow.reader.next()).toMatchObject({ rows: 2 });
    expect(await settledAfter(third, 100)).toBe(false);
    const next = slow.reader.next();
    expect(await settledAfter(third, 300)).toBe(true);
    expect(await next).toMatchObject({ rows: 3 });
    await slow.reader.close();
    await busy.reader.close();
  });

  it('answers a reader that starts waiting while its XREAD blocks at once, not at the block timeout', async () => {
    const first = open();
    const pending = first.reader.next();
    pending.catch(() => undefined);
    await until(async () => (await readerClients()).blocked === 1, 2000);
    const commands = await watchCommands();
    // Ten readers start waiting in one tick: one wake ends the XREAD for all of them.
    const late = Array.from({ length: 10 }, () => open());
    const started = Date.now();
    const answers = late.map(({ reader }) => reader.next());
    await sleep(10);
    await Promise.all(late.map(({ queryId }) => writer(queryId).write(data(7))));
    for (const answer of answers) expect(await answer).toMatchObject({ kind: 'data', rows: 7 });
    const waited = Date.now() - started;
    expect(waited).toBeLessThan(150);
    const wakes = commands.filter(
      ([name, key]) => name.toLowerCase() === 'xadd' && key.startsWith(`${keys.prefix}:mux:`),
    );
    expect(wakes).toHaveLength(1);
    // The first reader is still read for, and served.
    await writer(first.queryId).write(data(1));
    expect(await pending).toMatchObject({ rows: 1 });
    await Promise.all([first, ...late].map(({ reader }) => reader.close()));
  });

  it('asks each reader onSilence after its own quiet spell, whatever the other streams carry', async () => {
    await source.close();
    source = new RedisResultSource(redis, keys, {
      connector: new RedisConnector({ mode: 'single', url: testRedisUrl }),
      silenceMs: 300,
      ttlSeconds: 60,
      blockMs: BLOCK_MS,
    });
    const gone: ResultRecord = {
      kind: 'error',
      status: { reason: 'gone', sql_state: 'XX000', vendor_code: -103 },
    };
    let asked = 0;
    const silent = open({
      onSilence: () => {
        asked += 1;
        return Promise.resolve(gone);
      },
    });
    const busy = open();
    const started = Date.now();
    const verdict = silent.reader.next();
    // The busy stream gets a record every 50 ms: the silent reader's spell goes on regardless.
    const w = writer(busy.queryId, { chunks: 100 });
    for (let n = 1; n <= 8; n++) {
      await w.write(data(n));
      expect(await busy.reader.next()).toMatchObject({ rows: n });
      await sleep(50);
    }
    expect(await verdict).toEqual(gone);
    expect(asked).toBe(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    await silent.reader.close();
    await busy.reader.close();
  });

  it('ends a read blocked for a reader alone when it closes, and goes on for the others', async () => {
    const alone = open();
    const pending = alone.reader.next();
    pending.catch(() => undefined);
    await until(async () => (await readerClients()).blocked === 1, 2000);
    const started = Date.now();
    await alone.reader.close();
    await expect(pending).rejects.toBeInstanceOf(ReaderClosedError);
    expect(Date.now() - started).toBeLessThan(500);
    expect(await readerClients()).toMatchObject({ blocked: 0 });
    expect(await redis.exists(keys.out(alone.queryId), keys.alive(alone.queryId))).toBe(0);

    const leaving = open();
    const staying = open();
    const left = leaving.reader.next();
    left.catch(() => undefined);
    const stays = staying.reader.next();
    await until(() => source.stats.waiting === 2, 2000);
    await until(async () => (await readerClients()).blocked === 1, 2000);
    await leaving.reader.close();
    await expect(left).rejects.toBeInstanceOf(ReaderClosedError);
    expect(source.stats).toEqual({ open: 1, connections: 1, waiting: 1 });
    await writer(staying.queryId).write(data(5));
    expect(await stays).toMatchObject({ rows: 5 });
    await staying.reader.close();
  });

  it('fails every waiting reader when its connection is lost, and reads again for the next', async () => {
    const opened = [open(), open()];
    const pending = opened.map(({ reader }) => reader.next());
    for (const p of pending) p.catch(() => undefined);
    await until(async () => (await readerClients()).blocked === 1, 2000);
    const [id] = (await readerClients()).ids;
    await redis.client('KILL', 'ID', id);
    for (const p of pending) {
      const err = await p.then(
        () => new Error('resolved'),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(Error);
      expect(err).not.toBeInstanceOf(ReaderClosedError);
    }
    expect(source.stats.waiting).toBe(0);
    // A reader that failed may read again, and one opened now is served: the mux reconnected.
    const again = opened[0].reader.next();
    const fresh = open();
    const freshNext = fresh.reader.next();
    await writer(opened[0].queryId).write(data(1));
    await writer(fresh.queryId).write(data(2));
    expect(await again).toMatchObject({ rows: 1 });
    expect(await freshNext).toMatchObject({ rows: 2 });
    const after = await readerClients();
    expect(after.ids).toHaveLength(1);
    expect(after.ids[0]).not.toBe(id);
    await Promise.all([...opened, fresh].map(({ reader }) => reader.close()));
  });

  it('reads a large result over a connection of its own: a small result never waits behind its entries', async () => {
    const made: RedisClient[] = [];
    const connect = connector.connect.bind(connector);
    jest.spyOn(connector, 'connect').mockImplementation((options) => {
      const connection = connect(options);
      made.push(connection);
      return connection;
    });
    const large = open();
    const producer = writer(large.queryId, { chunks: 8, bytes: 64 * 1024 * 1024 });
    // Its first entry is read beside everyone's, and makes it a bulk result.
    await producer.write(data(1, BULK_BYTES));
    expect(await large.reader.next()).toMatchObject({ rows: 1 });
    const second = large.reader.next();
    await until(async () => (await readerClients()).blocked === 1, 2000);
    expect(made).toHaveLength(2);
    // Its connection takes nothing in now: its next entries, a MiB each, stay in the socket.
    (made[1] as unknown as { stream: Socket }).stream.pause();
    for (let n = 2; n <= 5; n++) await producer.write(data(n, 1024 * 1024));
    await producer.write(end());

    const small = open();
    const quick = writer(small.queryId);
    await quick.write(data(7));
    await quick.write(end());
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise((resolve) => (timer = setTimeout(() => resolve('late'), 2000)));
    const got = await Promise.race([readAll(small.reader), late]);
    clearTimeout(timer);
    expect(got).toEqual([7]);
    expect(await settledAfter(second, 0)).toBe(false);

    (made[1] as unknown as { stream: Socket }).stream.resume();
    expect(await second).toMatchObject({ rows: 2 });
    expect(await readAll(large.reader)).toEqual([3, 4, 5]);
    expect(source.stats).toMatchObject({ connections: 2 });
    await Promise.all([small.reader.close(), large.reader.close()]);
  });
});
