import Redis from 'ioredis';
import { randomBytes, randomUUID } from 'node:crypto';
import { ResultRecord } from '@app/contracts';
import { ReaderClosedError, ReaderHooks } from '../result.channel';
import { RedisKeys } from '../redis.keys';
import { RedisConnector } from './redis.connector';
import { RedisResultSink } from './redis-result.sink';
import { RedisResultSource } from './redis-result.source';
import { recordFields } from './stream.codec';
import { TimerTracker, trackTimers } from '@test/support/active-timers';
import { logCommands } from '@test/support/monitor';
import { testRedisUrl } from '@test/settings';

/**
 * A reader's one way out, against a real Redis: whatever the reader is doing when close() comes,
 * its keep-alive and silence timers, its place in the source's stream mux and its keys are
 * released, and a pending next() stops at once; its stream is not read for it again, and the
 * mux's one blocking connection stays, unblocked once nobody waits.
 */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let shared: Redis;
let keys: RedisKeys;
let source: RedisResultSource;

/**
 * A source whose mux has its blocking connection (a reader opened, read from and closed), so
 * that what a test counts is the reader's doing, not a connection still being set up.
 */
async function warmSource(silenceMs: number): Promise<void> {
  source = new RedisResultSource(shared, keys, {
    connector: new RedisConnector({ mode: 'single', url: testRedisUrl }),
    silenceMs,
    ttlSeconds: 60,
  });
  const queryId = randomUUID();
  const reader = source.open(queryId, { onSilence: () => Promise.resolve(undefined) });
  await new RedisResultSink(shared, keys, 60).end(queryId, {
    kind: 'error',
    status: { reason: 'x', sql_state: 'XX000', vendor_code: -103 },
  });
  await reader.next();
  await reader.close();
  await shared.ping();
}

async function open(silenceMs: number, hooks?: Partial<ReaderHooks>) {
  await warmSource(silenceMs);
  const before = timers();
  const queryId = randomUUID();
  const reader = source.open(queryId, { onSilence: () => Promise.resolve(undefined), ...hooks });
  return { queryId, reader, before };
}

let tracker: TimerTracker;

/** Timers and intervals left pending by the code under test (a reader's keep-alive is one). */
function timers(): number {
  return tracker.pending();
}

/** This source's blocking connections as Redis sees them, and which are blocked in a command. */
async function readerClients(): Promise<{ all: number; blocked: number }> {
  const list = (await shared.client('LIST')) as string;
  const mine = list.split('\n').filter((line) => line.includes(` name=${source.connectionName} `));
  return {
    all: mine.length,
    blocked: mine.filter((line) => / flags=\S*b/.test(line)).length,
  };
}

async function until(check: () => Promise<boolean> | boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms`);
    await sleep(10);
  }
}

beforeEach(async () => {
  shared = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
  await shared.ping();
  tracker = trackTimers();
  keys = new RedisKeys(`reader-spec-${randomBytes(4).toString('hex')}`);
});

afterEach(async () => {
  tracker.stop();
  await source.close();
  await shared.quit();
});

describe('RedisResultReader.close', () => {
  it('reads records in order while open, and keeps the alive key set', async () => {
    const { queryId, reader, before } = await open(5000);
    expect(timers()).toBe(before + 1);
    const records: ResultRecord[] = [
      { kind: 'head', columns: [{ name: 'g', type: 'integer' }], bytes: Buffer.from('h') },
      { kind: 'data', rows: 1, bytes: Buffer.from('d') },
    ];
    for (const r of records) await shared.xadd(keys.out(queryId), '*', ...recordFields(r));
    expect((await reader.next()).kind).toBe('head');
    expect((await reader.next()).kind).toBe('data');
    expect(await shared.exists(keys.alive(queryId))).toBe(1);
    await reader.close();
    expect(await shared.exists(keys.alive(queryId), keys.out(queryId))).toBe(0);
    expect(timers()).toBe(before);
  });

  it('stops a next() waiting in XREAD at once, and unblocks the connection it waited on', async () => {
    const { queryId, reader, before } = await open(5000);
    const pending = reader.next();
    pending.catch(() => undefined);
    await until(async () => (await readerClients()).blocked === 1, 2000);
    expect(source.stats).toEqual({ open: 1, connections: 1, waiting: 1 });
    const started = Date.now();
    await reader.close();
    await expect(pending).rejects.toBeInstanceOf(ReaderClosedError);
    expect(Date.now() - started).toBeLessThan(500);
    // Nobody waits any more: the mux's XREAD was woken rather than left to its timeout.
    expect(await readerClients()).toEqual({ all: 1, blocked: 0 });
    expect(source.stats).toEqual({ open: 0, connections: 1, waiting: 0 });
    expect(timers()).toBe(before);
    expect(await shared.exists(keys.alive(queryId))).toBe(0);
  });

  it('stops a next() that was asking onSilence, and its stream is not read again', async () => {
    let answer!: (verdict: ResultRecord | undefined) => void;
    let asked = 0;
    const { queryId, reader, before } = await open(100, {
      onSilence: () => {
        asked += 1;
        return new Promise((resolve) => (answer = resolve));
      },
    });
    // Every command Redis receives from now on: none may read the stream after the close.
    const { commands, stop } = await logCommands(shared);
    try {
      const pending = reader.next();
      pending.catch(() => undefined);
      await until(() => asked === 1, 2000);
      await reader.close();
      const closedAt = commands.length;
      // The pending next() ends with the close; the verdict comes after it.
      await expect(pending).rejects.toBeInstanceOf(ReaderClosedError);
      expect(source.stats).toEqual({ open: 0, connections: 1, waiting: 0 });
      answer(undefined);
      await sleep(300);
      const readsAfter = commands
        .slice(closedAt)
        .filter(
          ([name, ...args]) => name.toLowerCase() === 'xread' && args.includes(keys.out(queryId)),
        );
      expect(readsAfter).toEqual([]);
      expect(commands.some(([name]) => name.toLowerCase() === 'xread')).toBe(true);
      expect(await readerClients()).toEqual({ all: 1, blocked: 0 });
      expect(asked).toBe(1);
      expect(timers()).toBe(before);
    } finally {
      stop();
    }
  });

  it('is idempotent, releases a reader never read from, and beats only while open', async () => {
    let beats = 0;
    const { queryId, reader, before } = await open(5000, { onBeat: () => (beats += 1) });
    expect(beats).toBe(1);
    const first = reader.close();
    expect(reader.close()).toBe(first);
    await first;
    expect(source.stats).toEqual({ open: 0, connections: 1, waiting: 0 });
    expect(timers()).toBe(before);
    expect(await shared.exists(keys.alive(queryId))).toBe(0);
    await expect(reader.next()).rejects.toBeInstanceOf(ReaderClosedError);
    // A beat is due every 2 s: none comes after the close.
    await sleep(2300);
    expect(beats).toBe(1);
    expect(await shared.exists(keys.alive(queryId))).toBe(0);
  });

  it('closes the readers still open when the source closes', async () => {
    const { reader, before } = await open(5000);
    const pending = reader.next();
    pending.catch(() => undefined);
    await until(async () => (await readerClients()).blocked === 1, 2000);
    await source.close();
    await expect(pending).rejects.toBeInstanceOf(ReaderClosedError);
    expect(source.stats).toEqual({ open: 0, connections: 0, waiting: 0 });
    await until(async () => (await readerClients()).all === 0, 2000);
    expect(timers()).toBe(before);
  });
});
