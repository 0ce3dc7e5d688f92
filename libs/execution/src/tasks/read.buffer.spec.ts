import { Parser } from 'pg-protocol/dist/parser';
import { DataRowMessage, readDataRowsOnDemand } from './data-row.message';
import { READ_BUFFER_BYTES, ownRemainder, threadReadBuffer } from './read.buffer';

/** A DataRow message of one text value. */
function dataRow(value: string): Buffer {
  const body = Buffer.from(value);
  const message = Buffer.alloc(1 + 4 + 2 + 4 + body.length);
  message.write('D', 0);
  message.writeUInt32BE(message.length - 1, 1);
  message.writeInt16BE(1, 5);
  message.writeInt32BE(body.length, 7);
  body.copy(message, 11);
  return message;
}

/**
 * Hands `stream` to `parser` as a socket reading into the thread's shared buffer would: each read
 * of at most `readBytes` written into the same memory, over the one before it.
 */
function readShared(parser: Parser, stream: Buffer, readBytes: number): string[] {
  const shared = threadReadBuffer();
  const values: string[] = [];
  for (let at = 0; at < stream.length; at += readBytes) {
    const n = stream.copy(shared, 0, at, Math.min(at + readBytes, stream.length));
    parser.parse(shared.subarray(0, n), (msg) => {
      if (msg instanceof DataRowMessage) values.push(msg.fields[0]!);
    });
    // What the next read overwrites: a parser that kept a reference to it would read this.
    shared.fill(0x5a, 0, n);
  }
  return values;
}

describe(ownRemainder.name, () => {
  beforeAll(() => readDataRowsOnDemand());

  it('keeps a message cut by a read whole while the next read overwrites the shared buffer', () => {
    const values = Array.from({ length: 500 }, (_, i) => `${i}:${'é'.repeat(i % 37)}`);
    const stream = Buffer.concat(values.map(dataRow));
    // Reads of sizes that cut messages anywhere, header and body alike.
    for (const readBytes of [1, 3, 7, 64, 1000, 4093]) {
      expect(readShared(new Parser(), stream, readBytes)).toEqual(values);
    }
  });

  it('joins a message longer than a whole read', () => {
    const values = [
      'a',
      'x'.repeat(3 * READ_BUFFER_BYTES + 17),
      'b',
      'y'.repeat(READ_BUFFER_BYTES),
    ];
    const stream = Buffer.concat(values.map(dataRow));
    expect(readShared(new Parser(), stream, READ_BUFFER_BYTES)).toEqual(values);
  });

  it("keeps two connections' cut messages apart when their reads alternate", () => {
    // Two users' rows through one thread's shared buffer, a read of each in turn, every read
    // ending inside a message: each connection must get back its own rows and only those.
    const mine = Array.from({ length: 200 }, (_, i) => `mine ${i} ${'m'.repeat(i % 50)}`);
    const theirs = Array.from({ length: 200 }, (_, i) => `theirs ${i} ${'t'.repeat(i % 41)}`);
    const streams = [Buffer.concat(mine.map(dataRow)), Buffer.concat(theirs.map(dataRow))];
    const parsers = [new Parser(), new Parser()];
    const got: string[][] = [[], []];
    const readBytes = 97;
    for (let at = 0; at < Math.max(...streams.map((s) => s.length)); at += readBytes) {
      for (const i of [0, 1]) {
        if (at < streams[i].length) {
          got[i].push(
            ...readShared(parsers[i], streams[i].subarray(at, at + readBytes), readBytes),
          );
        }
      }
    }
    expect(got).toEqual([mine, theirs]);
  });

  it('keeps nothing of the shared buffer once a read is handled', () => {
    const parser = new Parser();
    // One read: a whole row and the start of the next, which the parser keeps for the next read.
    const stream = Buffer.concat([dataRow('one'), dataRow('two').subarray(0, 6)]);
    expect(readShared(parser, stream, 1024)).toEqual(['one']);
    const held = parser as unknown as { buffer: Buffer; bufferLength: number };
    expect(held.bufferLength).toBe(6);
    expect(held.buffer.buffer).not.toBe(threadReadBuffer().buffer);
  });

  it("copies a cut message out of the shared buffer even when a message's handler throws", () => {
    // A handler that throws mid-read must not leave the parser holding the shared buffer, which
    // the next read (another user's rows, on another connection of the thread) overwrites.
    const parser = new Parser();
    const shared = threadReadBuffer();
    const stream = Buffer.concat([dataRow('one'), dataRow('two')]);
    const cut = stream.length - 4;
    stream.copy(shared, 0, 0, cut);
    expect(() =>
      parser.parse(shared.subarray(0, cut), () => {
        throw new Error('a handler failed');
      }),
    ).toThrow('a handler failed');
    shared.fill(0x5a, 0, cut);
    const held = parser as unknown as { buffer: Buffer };
    expect(held.buffer.buffer).not.toBe(shared.buffer);
    const seen: string[] = [];
    stream.copy(shared, 0, cut);
    parser.parse(shared.subarray(0, stream.length - cut), (msg) =>
      seen.push((msg as DataRowMessage).fields[0]!),
    );
    // pg-protocol keeps its place at the read's start when a handler throws: both rows again,
    // as the bytes PostgreSQL sent, none of what overwrote the shared buffer.
    expect(seen).toEqual(['one', 'two']);
  });

  it('keeps a connection its carry across reads that end between two messages', () => {
    const parser = new Parser();
    const held = parser as unknown as { buffer: Buffer };
    const [one, two, three] = [dataRow('one'), dataRow('two'), dataRow('three')];
    // Cut inside `two`, then its end alone (nothing left), then cut inside `three`.
    readShared(parser, Buffer.concat([one, two.subarray(0, 9)]), 1024);
    const carry = held.buffer;
    expect(readShared(parser, two.subarray(9), 1024)).toEqual(['two']);
    expect(readShared(parser, three.subarray(0, 9), 1024)).toEqual([]);
    expect(held.buffer).toBe(carry);
  });

  it("leaves a socket's own buffers to pg-protocol, as it keeps them", () => {
    const parser = new Parser();
    const row = dataRow('own');
    const read = Buffer.from(row.subarray(0, 6));
    const seen: string[] = [];
    parser.parse(read, () => undefined);
    // Not copied: a buffer no other read will fill is kept by reference, as pg-protocol does.
    expect((parser as unknown as { buffer: Buffer }).buffer).toBe(read);
    parser.parse(Buffer.from(row.subarray(6)), (msg) =>
      seen.push((msg as DataRowMessage).fields[0]!),
    );
    expect(seen).toEqual(['own']);
  });
});
