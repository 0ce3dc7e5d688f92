import { dirname } from 'node:path';
import { Parser } from 'pg-protocol/dist/parser';
import { DataRowMessage, readDataRowsOnDemand } from './data-row.message';
import { MAX_VALUE_CHARS } from './oversized-value.guard';

/** A DataRow message of text values. */
function dataRow(values: (string | null)[]): Buffer {
  const parts: Buffer[] = [Buffer.from('D'), Buffer.alloc(4), Buffer.alloc(2)];
  parts[2].writeInt16BE(values.length);
  for (const value of values) {
    const length = Buffer.alloc(4);
    length.writeInt32BE(value === null ? -1 : Buffer.byteLength(value));
    parts.push(length);
    if (value !== null) parts.push(Buffer.from(value));
  }
  const message = Buffer.concat(parts);
  message.writeUInt32BE(message.length - 1, 1);
  return message;
}

/**
 * readDataRowsOnDemand wraps pg-protocol's Parser.handlePacket, which pg runs in its socket's
 * 'data' listener: these fail when pg-protocol moves it, or when pg stops parsing with this
 * very module.
 */
describe(readDataRowsOnDemand.name, () => {
  beforeAll(() => readDataRowsOnDemand());

  it('patches the parser pg itself uses', () => {
    const pgs = require.resolve('pg-protocol/dist/parser', {
      paths: [dirname(require.resolve('pg'))],
    });
    expect(pgs).toBe(require.resolve('pg-protocol/dist/parser'));
  });

  it('hands a DataRow over with its body, and its fields as pg decodes them when asked', () => {
    const parser = new Parser();
    const seen: unknown[] = [];
    // Two rows in one chunk, the second cut across two: each is read while it is handed over.
    const both = Buffer.concat([dataRow(['1', null, 'é😀']), dataRow(['', 'two'])]);
    const cut = both.length - 3;
    const onMessage = (msg: unknown) => {
      expect(msg).toBeInstanceOf(DataRowMessage);
      const row = msg as DataRowMessage;
      seen.push([row.name, row.bytes.readInt16BE(row.from), row.to - row.from, row.fields]);
    };
    parser.parse(both.subarray(0, cut), onMessage);
    parser.parse(both.subarray(cut), onMessage);
    expect(seen).toEqual([
      ['dataRow', 3, 2 + 4 + 1 + 4 + 4 + Buffer.byteLength('é😀'), ['1', null, 'é😀']],
      ['dataRow', 2, 2 + 4 + 4 + 3, ['', 'two']],
    ]);
  });

  it('knows a row with a value too long for a string, and gives it no fields', () => {
    // One character past V8's longest string; zeroed lazily by the kernel, it costs little memory.
    const bytes = MAX_VALUE_CHARS + 1;
    const message = Buffer.alloc(5 + 2 + 4 + 1 + 4 + bytes);
    message.writeInt16BE(2, 5);
    message.writeInt32BE(1, 7);
    message.write('x', 11);
    message.writeInt32BE(bytes, 12);
    const row = new DataRowMessage(message, 5, message.length, message.length - 1);
    expect(row.oversized).toBe(true);
    expect(row.fields).toEqual([]);
  });

  it('knows a row whose values all fit a string', () => {
    const message = dataRow(['a', 'b']);
    const row = new DataRowMessage(message, 5, message.length, message.length - 1);
    expect(row.oversized).toBe(false);
    expect(row.length).toBe(message.length - 1);
  });

  it('gives the rows to the sink while one is set, in order and whole, and each other message to pg as ever', () => {
    const parser = new Parser();
    const messages: string[] = [];
    /** What the sink was told, in order: each row's value, and its flushes. */
    const sunk: string[] = [];
    let row: DataRowMessage | undefined;
    const onMessage = (msg: unknown) => {
      const name = (msg as { name: string }).name;
      messages.push(name);
      if (msg instanceof DataRowMessage && !row) {
        row = msg;
        // As TextCursor does after a read's first row: the rest straight to it.
        row.sink = {
          row: (bytes, from, to, length) => {
            expect(length).toBe(to - from + 4);
            // The message's header is just before the body, in the same buffer.
            expect(bytes[from - 5]).toBe(0x44);
            expect(bytes.readInt32BE(from - 4)).toBe(length);
            sunk.push(bytes.subarray(from + 2 + 4, to).toString());
          },
          flush: () => {
            sunk.push('flush');
            if (row?.sink) messages.push('flush');
          },
        };
      }
    };
    // PortalSuspended ('s'): the read's end, where the reader clears the sink.
    const suspended = Buffer.from([0x73, 0, 0, 0, 4]);
    const chunk = Buffer.concat([
      dataRow(['a']),
      dataRow(['bb']),
      dataRow(['ccc']),
      suspended,
      dataRow(['d']),
    ]);
    // Cut inside the second row: a row across two reads of the socket still comes whole.
    parser.parse(chunk.subarray(0, 15), onMessage);
    parser.parse(chunk.subarray(15, chunk.length - 10), (msg) => {
      onMessage(msg);
      if ((msg as { name: string }).name === 'portalSuspended') row!.sink = undefined;
    });
    parser.parse(chunk.subarray(chunk.length - 10), onMessage);
    // Flushed at the end of each socket read, and before the message that ends the rows is
    // handed to pg.
    expect(sunk).toEqual(['flush', 'bb', 'ccc', 'flush']);
    // pg is told nothing of a row the sink took.
    expect(messages).toEqual(['dataRow', 'flush', 'flush', 'portalSuspended', 'dataRow']);
  });
});
