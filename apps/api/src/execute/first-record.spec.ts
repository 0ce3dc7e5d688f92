import { ResultRecord, okStatus, statusOf } from '@app/contracts';
import { InProcessResultChannel, ReaderClosedError, ResultReader } from '@app/transport';
import { ClientGoneError, readToFirstBytes, readWithin } from './first-record';

/** The race before a response starts: the first bytes of a body, or the client leaving first. */
const quiet = { onSilence: () => Promise.resolve(undefined) };
const head = (text: string): ResultRecord => ({
  kind: 'head',
  columns: [],
  bytes: Buffer.from(text),
});
const data = (text: string): ResultRecord => ({ kind: 'data', rows: 1, bytes: Buffer.from(text) });

let channel: InProcessResultChannel;
let reader: ResultReader;

beforeEach(() => {
  channel = new InProcessResultChannel(5000);
  reader = channel.open('q', quiet);
});

afterEach(async () => {
  await reader.close();
  await channel.close();
});

describe(readToFirstBytes.name, () => {
  it('reads past records without bytes up to the first one with some', async () => {
    for (const record of [head(''), data(''), data('[1]'), data('[2]')]) {
      await channel.end('q', record);
    }
    const read = await readToFirstBytes(reader, new AbortController().signal);
    expect(read.map((r) => r.kind === 'data' && r.bytes.toString())).toEqual([false, '', '[1]']);
    // What follows is left for the body.
    expect(await reader.next()).toEqual(data('[2]'));
  });

  it('stops at a terminal record that comes before any bytes', async () => {
    const failed: ResultRecord = { kind: 'error', status: statusOf('TIME_LIMIT') };
    await channel.end('q', head(''));
    await channel.end('q', failed);
    expect(await readToFirstBytes(reader)).toEqual([head(''), failed]);
    const ended: ResultRecord = { kind: 'end', status: okStatus(), bytes: Buffer.alloc(0) };
    const other = channel.open('r', quiet);
    await channel.end('r', ended);
    expect(await readToFirstBytes(other)).toEqual([ended]);
    await other.close();
  });

  it('rejects with ClientGoneError when the client leaves while it waits, or has left', async () => {
    const controller = new AbortController();
    const waiting = readToFirstBytes(reader, controller.signal);
    await channel.end('q', head(''));
    controller.abort();
    await expect(waiting).rejects.toBeInstanceOf(ClientGoneError);
    const other = channel.open('r', quiet);
    await expect(readToFirstBytes(other, controller.signal)).rejects.toBeInstanceOf(
      ClientGoneError,
    );
    await other.close();
  });

  it("rejects with the reader's own error", async () => {
    const waiting = readToFirstBytes(reader, new AbortController().signal);
    await reader.close();
    await expect(waiting).rejects.toBeInstanceOf(ReaderClosedError);
  });
});

describe(readWithin.name, () => {
  it('reads nothing with a wait of 0, even when the whole result is there', async () => {
    await channel.end('q', { kind: 'end', status: okStatus(), bytes: Buffer.from('{}') });
    expect(await readWithin(reader, undefined, 0)).toBeUndefined();
    // Left unread: the result is still there for whoever reads it next.
    expect((await reader.next()).kind).toBe('end');
  });

  it('gives what came within the wait', async () => {
    await channel.end('q', { kind: 'end', status: okStatus(), bytes: Buffer.from('{}') });
    expect((await readWithin(reader, undefined, 1_000))?.map((r) => r.kind)).toEqual(['end']);
  });
});
