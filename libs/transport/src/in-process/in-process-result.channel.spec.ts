import { once } from 'node:events';
import { MessageChannel, MessagePort } from 'node:worker_threads';
import { ResultRecord } from '@app/contracts';
import { TimerTracker, trackTimers } from '@test/support/active-timers';
import { ReaderClosedError } from '../result.channel';
import { InProcessResultChannel } from './in-process-result.channel';
import { SharedKeptTotal } from './shared-kept.total';
import { ProgressMessage, RecordMessage } from './port.messages';
import type { Produced } from '../query.registry';

/** The in-process reader's one way out: the same promises as the Redis reader's. */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const quiet = { onSilence: () => Promise.resolve(undefined) };

let tracker: TimerTracker;
let channel: InProcessResultChannel;

beforeEach(() => {
  tracker = trackTimers();
  channel = new InProcessResultChannel(5000);
});

afterEach(async () => {
  tracker.stop();
  await channel.close();
});

function post(port: MessagePort, record: ResultRecord) {
  port.postMessage({ type: 'record', record } satisfies RecordMessage);
}

describe('InProcessResultChannel readers', () => {
  it('hands records over in order', async () => {
    const reader = channel.open('q1', quiet);
    const { port1, port2 } = new MessageChannel();
    channel.attach('q1', port1);
    post(port2, { kind: 'head', columns: [], bytes: Buffer.from('h') });
    post(port2, {
      kind: 'end',
      status: { reason: 'OK', sql_state: '00000', vendor_code: 0 },
      bytes: Buffer.from('e'),
    });
    expect((await reader.next()).kind).toBe('head');
    expect((await reader.next()).kind).toBe('end');
    await reader.close();
    port2.close();
    expect(channel.stats).toEqual({ open: 0, gone: 0 });
    expect(tracker.pending()).toBe(0);
  });

  it('passes on what the producer says it made, and since when it streams', async () => {
    const reports: Produced[] = [];
    const { port1, port2 } = new MessageChannel();
    channel.attach('q5', port1, { onProgress: (produced) => reports.push(produced) });
    port2.postMessage({ type: 'progress', rows: 3, bytes: 30 } satisfies ProgressMessage);
    port2.postMessage({
      type: 'progress',
      rows: 5,
      bytes: 50,
      streamingAt: 1_234,
    } satisfies ProgressMessage);
    while (reports.length < 2) await sleep(5);
    expect(reports).toEqual([
      { rows: 3, bytes: 30 },
      { rows: 5, bytes: 50, streamingAt: 1_234 },
    ]);
    port1.close();
    port2.close();
  });

  it('stops a waiting next() at once, clears its silence timer and closes the producer port', async () => {
    const reader = channel.open('q2', quiet);
    const { port1, port2 } = new MessageChannel();
    channel.attach('q2', port1);
    const pending = reader.next();
    await sleep(20);
    expect(tracker.pending()).toBe(1);
    const producerGone = once(port2, 'close');
    const started = Date.now();
    await reader.close();
    await expect(pending).rejects.toBeInstanceOf(ReaderClosedError);
    // Well short of the 5 s silence it would otherwise wait out, with room for a loaded machine.
    expect(Date.now() - started).toBeLessThan(1000);
    await producerGone;
    expect(tracker.pending()).toBe(0);
    expect(channel.stats).toEqual({ open: 0, gone: 0 });
  });

  it('stops a next() that was asking onSilence, and asks no more', async () => {
    channel = new InProcessResultChannel(30);
    let answer!: (verdict: ResultRecord | undefined) => void;
    let asked = 0;
    const reader = channel.open('q3', {
      onSilence: () => {
        asked += 1;
        return new Promise((resolve) => (answer = resolve));
      },
    });
    const pending = reader.next();
    while (asked === 0) await sleep(5);
    await reader.close();
    answer(undefined);
    await expect(pending).rejects.toBeInstanceOf(ReaderClosedError);
    await sleep(100);
    expect(asked).toBe(1);
    expect(tracker.pending()).toBe(0);
  });

  it('is idempotent, and stops a producer that attaches after its reader closed', async () => {
    const reader = channel.open('q4', quiet);
    const first = reader.close();
    expect(reader.close()).toBe(first);
    await first;
    await expect(reader.next()).rejects.toBeInstanceOf(ReaderClosedError);
    expect(channel.stats).toEqual({ open: 0, gone: 1 });
    const { port1, port2 } = new MessageChannel();
    const producerGone = once(port2, 'close');
    channel.attach('q4', port1);
    await producerGone;
    expect(channel.stats).toEqual({ open: 0, gone: 0 });
    expect(tracker.pending()).toBe(0);
  });
});

describe('InProcessResultChannel kept results', () => {
  const ok = { reason: 'OK', sql_state: '00000', vendor_code: 0 };

  it('keeps every record for any number of readers, from the first; a reader that closes stops nothing', async () => {
    const first = channel.openKept('k1', quiet);
    const { port1, port2 } = new MessageChannel();
    channel.attach('k1', port1);
    let stopped = false;
    port2.on('close', () => (stopped = true));
    post(port2, { kind: 'head', columns: [], bytes: Buffer.from('h') });
    expect((await first.next()).kind).toBe('head');
    await first.close();
    post(port2, { kind: 'end', status: ok, bytes: Buffer.from('e') });
    const second = channel.openKept('k1', quiet);
    expect((await second.next()).kind).toBe('head');
    expect((await second.next()).kind).toBe('end');
    await sleep(10);
    expect(stopped).toBe(false);
    expect(await channel.kept('k1')).toBe(true);
    await second.close();
    port2.close();
  });

  it('drops a kept result on dropKept, and after its TTL', async () => {
    const short = new InProcessResultChannel(5000, 0.05);
    try {
      short.openKept('k2', quiet);
      const { port1, port2 } = new MessageChannel();
      short.attach('k2', port1);
      post(port2, { kind: 'end', status: ok, bytes: Buffer.alloc(0) });
      await sleep(20);
      expect(await short.kept('k2')).toBe(true);
      await sleep(80);
      expect(await short.kept('k2')).toBe(false);
      short.openKept('k3', quiet);
      await short.dropKept('k3');
      expect(await short.kept('k3')).toBe(false);
      port2.close();
    } finally {
      await short.close();
    }
  });

  it('answers a reader opened after its result was dropped that it is gone, and keeps nothing for it', async () => {
    // A fetch that found the result kept, then opened its reader just after the TTL dropped it
    // (CI, a standalone pass beside another): the reader made the query a kept result again,
    // empty and with no TTL, and every fetch after answered 200 with no body.
    const short = new InProcessResultChannel(5000, 0.05);
    try {
      short.openKept('k4', quiet);
      const { port1, port2 } = new MessageChannel();
      short.attach('k4', port1);
      post(port2, { kind: 'end', status: ok, bytes: Buffer.alloc(0) });
      await sleep(100);
      expect(await short.kept('k4')).toBe(false);
      const late = short.openKept('k4', quiet);
      const record = await late.next();
      expect(record.kind).toBe('error');
      expect(record.kind === 'error' && record.status.vendor_code).toBe(-113);
      await late.close();
      expect(await short.kept('k4')).toBe(false);
      port2.close();
    } finally {
      await short.close();
    }
  });
});

describe('InProcessResultChannel kept results and their total', () => {
  const ok = { reason: 'OK', sql_state: '00000', vendor_code: 0 };
  const data = (n: number): ResultRecord => ({ kind: 'data', rows: 1, bytes: Buffer.alloc(n) });

  it('gives back what a kept result holds when it fails, when it is dropped, and what comes after a drop', async () => {
    const total = new SharedKeptTotal(SharedKeptTotal.buffer());
    const capped = new InProcessResultChannel(5000, 60, total);
    // As a writer does: takes the bytes, then posts the record.
    const send = (port: MessagePort, record: ResultRecord) => {
      if (record.kind !== 'error') {
        expect(total.take(record.bytes.length, 1000)).toBe(true);
      }
      post(port, record);
    };
    try {
      const first = capped.openKept('k1', quiet);
      const a = new MessageChannel();
      capped.attach('k1', a.port1);
      send(a.port2, { kind: 'end', status: ok, bytes: Buffer.alloc(600) });
      expect((await first.next()).kind).toBe('end');
      expect(await capped.keptBytes()).toBe(600);

      const second = capped.openKept('k2', quiet);
      const b = new MessageChannel();
      capped.attach('k2', b.port1);
      send(b.port2, data(300));
      expect((await second.next()).kind).toBe('data');
      expect(total.take(300, 1000)).toBe(false);
      send(b.port2, {
        kind: 'error',
        status: { reason: 'full', sql_state: '54000', vendor_code: -112 },
      });
      // The reader had read the first record: the error comes next; the 300 bytes went back.
      expect(await second.next()).toMatchObject({ kind: 'error', status: { vendor_code: -112 } });
      expect(await capped.keptBytes()).toBe(600);
      // A new reader reads the error alone.
      expect(await capped.openKept('k2', quiet).next()).toMatchObject({ kind: 'error' });

      // Dropped while it runs: the bytes of what still comes go back too.
      capped.openKept('k3', quiet);
      const c = new MessageChannel();
      capped.attach('k3', c.port1);
      send(c.port2, data(100));
      await sleep(20);
      await capped.dropKept('k3');
      send(c.port2, data(100));
      send(c.port2, { kind: 'end', status: ok, bytes: Buffer.alloc(50) });
      await sleep(20);
      expect(await capped.keptBytes()).toBe(600);
      await capped.dropKept('k1');
      expect(await capped.keptBytes()).toBe(0);
      for (const port of [a.port2, b.port2, c.port2]) port.close();
    } finally {
      await capped.close();
    }
  });

  it("counts each owner's kept results apart, and gives their bytes back to the owner too", async () => {
    const total = new SharedKeptTotal(SharedKeptTotal.buffer());
    const capped = new InProcessResultChannel(5000, 60, total);
    const caps = { total: 1000, user: 500 };
    // As a thread does: the owner's total comes with the task, as shared memory.
    const budgetOf = (owner: string) =>
      total.budget(caps, new SharedKeptTotal(capped.ownerKept(owner)));
    const ownerBytes = (owner: string) => new SharedKeptTotal(capped.ownerKept(owner)).bytes;
    const [a, b] = [new MessageChannel(), new MessageChannel()];
    try {
      const ann = budgetOf('ann');
      capped.openKept('a1', quiet);
      capped.attach('a1', a.port1, { owner: 'ann' });
      expect(await ann.take(400)).toBeUndefined();
      post(a.port2, data(400));
      expect(await ann.take(200)).toBe('kept-user-full');
      // Another owner's share is theirs; the total still bounds both.
      const bob = budgetOf('bob');
      capped.openKept('b1', quiet);
      capped.attach('b1', b.port1, { owner: 'bob' });
      expect(await bob.take(500)).toBeUndefined();
      post(b.port2, data(500));
      expect(await budgetOf('cid').take(200)).toBe('kept-full');
      expect(ownerBytes('cid')).toBe(0);
      await sleep(20);
      expect([ownerBytes('ann'), ownerBytes('bob'), await capped.keptBytes()]).toEqual([
        400, 500, 900,
      ]);
      // A failure, a drop, and what comes after a drop: all given back to their owner.
      post(a.port2, {
        kind: 'error',
        status: { reason: 'x', sql_state: '54000', vendor_code: -112 },
      });
      await capped.dropKept('b1');
      expect(await bob.take(100)).toBeUndefined();
      post(b.port2, data(100));
      await sleep(20);
      expect([ownerBytes('ann'), ownerBytes('bob'), await capped.keptBytes()]).toEqual([0, 0, 0]);
    } finally {
      for (const port of [a.port2, b.port2]) port.close();
      await capped.close();
    }
  });
});
