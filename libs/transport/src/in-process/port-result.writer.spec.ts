import { MessageChannel } from 'node:worker_threads';
import { ResultRecord, statusOf } from '@app/contracts';
import { TimerTracker, trackTimers } from '@test/support/active-timers';
import { FlowWindow, ResultReader, StopReason } from '../result.channel';
import { InProcessResultChannel } from './in-process-result.channel';
import { PortResultWriter } from './port-result.writer';
import { data, end, settledAfter, sleep, stoppedWith } from '@test/support/flow';

/**
 * Flow control of standalone mode, end to end within one thread: a PortResultWriter on one end
 * of a real MessageChannel, the InProcessResultChannel's reader on the other.
 */
const quiet = { onSilence: () => Promise.resolve(undefined) };
/** Long enough for a message to cross the channel and its answer to come back. */
const ROUND_TRIP_MS = 80;

const settled = (promise: Promise<unknown>) => settledAfter(promise, ROUND_TRIP_MS);

let tracker: TimerTracker;
let channel: InProcessResultChannel;
let queryCount = 0;

beforeEach(() => {
  tracker = trackTimers();
  channel = new InProcessResultChannel(5000);
});

afterEach(async () => {
  await channel.close();
  tracker.stop();
});

/** A reader and the writer of one query, connected as the worker pool connects them. */
function open(window: Partial<FlowWindow> = {}): {
  queryId: string;
  reader: ResultReader;
  writer: PortResultWriter;
} {
  const queryId = `q${++queryCount}`;
  const reader = channel.open(queryId, quiet);
  const { port1, port2 } = new MessageChannel();
  channel.attach(queryId, port1);
  const writer = new PortResultWriter(port2, {
    chunks: 4,
    bytes: 1_000_000,
    idleTimeoutMs: 5_000,
    ...window,
  });
  return { queryId, reader, writer };
}

describe('PortResultWriter flow control', () => {
  it('waits while a full window of chunks is unread, and goes on when the consumer reads', async () => {
    const { reader, writer } = open({ chunks: 3 });
    for (let n = 1; n <= 3; n++) await writer.write(data(n));
    const fourth = writer.write(data(4));
    expect(await settled(fourth)).toBe(false);
    expect((await reader.next()).kind).toBe('data');
    expect(await settled(fourth)).toBe(true);
    // The window is full again: one read makes room for exactly one more.
    const fifth = writer.write(data(5));
    expect(await settled(fifth)).toBe(false);
    await reader.next();
    await fifth;
  });

  it('waits while a full window of bytes is unread, whatever the count of chunks', async () => {
    // recordSize counts 64 bytes of overhead per record: two of 436 bytes fill 1000.
    const { reader, writer } = open({ chunks: 100, bytes: 1000 });
    await writer.write(data(1, 436));
    const second = writer.write(data(2, 436));
    expect(await settled(second)).toBe(true);
    const third = writer.write(data(3, 10));
    expect(await settled(third)).toBe(false);
    await reader.next();
    expect(await settled(third)).toBe(true);
  });

  it('stops with client-idle when the consumer takes nothing for the idle timeout', async () => {
    const { writer } = open({ chunks: 2, idleTimeoutMs: 200 });
    await writer.write(data(1));
    await writer.write(data(2));
    const started = Date.now();
    expect(await stoppedWith(writer.write(data(3)))).toBe('client-idle');
    const waited = Date.now() - started;
    expect(waited).toBeGreaterThanOrEqual(190);
    expect(waited).toBeLessThan(1000);
    expect(tracker.pending()).toBe(0);
  });

  it('does not stop a producer whose consumer keeps reading, however slowly', async () => {
    const { reader, writer } = open({ chunks: 1, idleTimeoutMs: 150 });
    const writing = (async () => {
      for (let n = 1; n <= 5; n++) await writer.write(data(n));
    })();
    // Each read comes within the idle timeout, and all of them take far longer than one.
    const rows: number[] = [];
    for (let n = 1; n <= 5; n++) {
      await sleep(100);
      const record = await reader.next();
      rows.push(record.kind === 'data' ? record.rows : -1);
    }
    await writing;
    expect(rows).toEqual([1, 2, 3, 4, 5]);
  });

  it('stops a waiting producer with cancelled when the reader cancels, and tells its watcher', async () => {
    const { reader, writer } = open({ chunks: 1 });
    const onStop = jest.fn();
    writer.watch(onStop);
    await writer.write(data(1));
    const waiting = writer.write(data(2));
    expect(await settled(waiting)).toBe(false);
    const started = Date.now();
    await reader.cancel();
    expect(await stoppedWith(waiting)).toBe('cancelled');
    expect(Date.now() - started).toBeLessThan(500);
    expect(onStop.mock.calls).toEqual([['cancelled']]);
    // Later writes fail at once; the final record still goes.
    expect(await stoppedWith(writer.write(data(3)))).toBe('cancelled');
    await writer.write(end());
  });

  it('hears a cancel sent through the source, and one sent before the producer attached', async () => {
    const early = channel.open('early', quiet);
    await channel.cancel('early');
    const { port1, port2 } = new MessageChannel();
    channel.attach('early', port1);
    const writer = new PortResultWriter(port2, { chunks: 4, bytes: 1e6, idleTimeoutMs: 5000 });
    const onStop = jest.fn();
    await sleep(ROUND_TRIP_MS);
    writer.watch(onStop);
    expect(onStop.mock.calls).toEqual([['cancelled']]);
    expect(await stoppedWith(writer.write(data(1)))).toBe('cancelled');
    await early.close();

    const { queryId, writer: other } = open();
    const heard = new Promise<StopReason>((resolve) => other.watch(resolve));
    await channel.cancel(queryId);
    expect(await heard).toBe('cancelled');
  });

  it('tells its watcher consumer-gone, once, when the reader closes', async () => {
    const { reader, writer } = open();
    const onStop = jest.fn();
    writer.watch(onStop);
    await writer.write(data(1));
    await reader.close();
    await sleep(ROUND_TRIP_MS);
    expect(onStop.mock.calls).toEqual([['consumer-gone']]);
    await reader.close();
    await sleep(ROUND_TRIP_MS);
    expect(onStop).toHaveBeenCalledTimes(1);
  });

  it('tells its watcher once, whatever comes after the first stop', async () => {
    const { queryId, reader, writer } = open();
    const onStop = jest.fn();
    writer.watch(onStop);
    await reader.cancel();
    await channel.cancel(queryId);
    await reader.close();
    await sleep(ROUND_TRIP_MS);
    expect(onStop.mock.calls).toEqual([['cancelled']]);
  });

  it('calls no watcher that stopped watching', async () => {
    const { reader, writer } = open();
    const onStop = jest.fn();
    const unwatch = writer.watch(onStop);
    unwatch();
    await reader.cancel();
    await reader.close();
    await sleep(ROUND_TRIP_MS);
    expect(onStop).not.toHaveBeenCalled();
  });

  it('fails a waiting and every later non-final write with the reason it was interrupted for', async () => {
    const { reader, writer } = open({ chunks: 1 });
    await writer.write(data(1));
    const waiting = writer.write(data(2));
    expect(await settled(waiting)).toBe(false);
    writer.interrupt('timeout');
    writer.interrupt('shutdown'); // the first reason stays
    expect(await stoppedWith(waiting)).toBe('timeout');
    expect(await stoppedWith(writer.write(data(3)))).toBe('timeout');
    // The final record is not stopped: the consumer learns why the result ended.
    const status = statusOf('TIME_LIMIT', 'statement time limit exceeded');
    await writer.write({ kind: 'end', status, bytes: Buffer.alloc(0) });
    expect(await reader.next()).toMatchObject({ kind: 'data', rows: 1 });
    expect(await reader.next()).toMatchObject({ kind: 'end', status });
  });

  it('never makes a final record wait, however full the window', async () => {
    const { reader, writer } = open({ chunks: 1, bytes: 100, idleTimeoutMs: 60_000 });
    await writer.write(data(1));
    const final = writer.writeFinal([end()]);
    expect(await settled(final)).toBe(true);
    await final;
    const error: ResultRecord = { kind: 'error', status: statusOf('INTERNAL') };
    const { writer: failing } = open({ chunks: 1, idleTimeoutMs: 60_000 });
    await failing.write(data(1));
    expect(await settled(failing.write(error))).toBe(true);
    expect((await reader.next()).kind).toBe('data');
    expect((await reader.next()).kind).toBe('end');
    expect(tracker.pending()).toBe(0);
  });
});

describe('the in-process channel, writer to reader', () => {
  it('hands over records in the order written, bytes intact, through the terminal one', async () => {
    const { reader, writer } = open({ chunks: 100 });
    const head: ResultRecord = {
      kind: 'head',
      columns: [{ name: 'n', type: 'integer' }],
      bytes: Buffer.from('head'),
    };
    // All of it is written before the first read: the records wait in the channel, in order.
    await writer.write(head);
    for (let n = 1; n <= 6; n++) await writer.write(data(n, n));
    await writer.writeFinal([data(7, 7), end()]);
    await sleep(ROUND_TRIP_MS);
    const got: ResultRecord[] = [];
    for (;;) {
      const record = await reader.next();
      got.push(record);
      if (record.kind === 'end') break;
    }
    expect(got[0]).toEqual(head);
    expect(got.slice(1, 8)).toEqual([1, 2, 3, 4, 5, 6, 7].map((n) => data(n, n)));
    expect(got[8]).toEqual(end());
    expect(got).toHaveLength(9);
    // Each Buffer is a Buffer again after crossing the port.
    expect(got.every((r) => r.kind === 'error' || Buffer.isBuffer(r.bytes))).toBe(true);
  });

  it("keeps nothing of a record once its write resolved: the caller may write over its bytes (the runner's reuse)", async () => {
    const { reader, writer } = open({ chunks: 100 });
    const written = [100, 200_000].map((size, i) => Buffer.alloc(size, 0x61 + i));
    for (const [i, bytes] of written.entries()) {
      const chunk = Buffer.from(bytes);
      await writer.write({ kind: 'data', rows: i + 1, bytes: chunk });
      chunk.fill(0x7a);
    }
    await sleep(ROUND_TRIP_MS);
    for (const bytes of written) {
      const record = await reader.next();
      expect(record.kind === 'data' && record.bytes.equals(bytes)).toBe(true);
    }
    await reader.close();
  });

  it('closes the producer port after the terminal record, and tells no watcher the consumer is gone', async () => {
    const { reader, writer } = open();
    const onStop = jest.fn();
    writer.watch(onStop);
    await writer.write(end());
    expect((await reader.next()).kind).toBe('end');
    await reader.close();
    await sleep(ROUND_TRIP_MS);
    expect(onStop).not.toHaveBeenCalled();
    expect(channel.stats).toEqual({ open: 0, gone: 0 });
  });

  it('returns the verdict of onSilence when the producer stays quiet', async () => {
    channel = new InProcessResultChannel(40);
    const status = statusOf('INTERNAL', 'worker lost');
    let asked = 0;
    const reader = channel.open('silent', {
      onSilence: () => {
        asked += 1;
        return Promise.resolve(asked < 2 ? undefined : { kind: 'error', status });
      },
    });
    const started = Date.now();
    expect(await reader.next()).toEqual({ kind: 'error', status });
    expect(asked).toBe(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(70);
    await reader.close();
    expect(tracker.pending()).toBe(0);
  });
});
