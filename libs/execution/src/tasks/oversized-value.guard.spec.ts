import { dirname } from 'node:path';
import { Parser } from 'pg-protocol/dist/parser';
import {
  MAX_VALUE_CHARS,
  guardOversizedValues,
  isOversizedRow,
  isStringTooLong,
} from './oversized-value.guard';

/** One backend message: its type byte, its length, its body. */
function message(code: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(code, 0, 'latin1');
  head.writeUInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

/** A DataRow of one value of `bytes` bytes, all zero (NUL: one character each). */
function dataRowOf(bytes: number): Buffer {
  // Zeroed lazily by the kernel: pages only read stay its one zero page, costing little memory.
  const row = Buffer.alloc(5 + 2 + 4 + bytes);
  row.write('D', 0, 'latin1');
  row.writeUInt32BE(row.length - 1, 1);
  row.writeInt16BE(1, 5);
  row.writeInt32BE(bytes, 7);
  return row;
}

const commandComplete = message('C', Buffer.from('SELECT 1\0'));

function parse(...chunks: Buffer[]): { name: string; [key: string]: unknown }[] {
  const parser = new Parser();
  const messages: { name: string }[] = [];
  for (const chunk of chunks) parser.parse(chunk, (msg) => messages.push(msg));
  return messages;
}

/**
 * guardOversizedValues wraps pg-protocol's Parser.handlePacket, which pg runs in its socket's
 * 'data' listener: these fail when pg-protocol moves it, or when pg stops parsing with this
 * very module.
 */
describe(guardOversizedValues.name, () => {
  beforeAll(() => guardOversizedValues());

  it('patches the parser pg itself uses', () => {
    const pgs = require.resolve('pg-protocol/dist/parser', {
      paths: [dirname(require.resolve('pg'))],
    });
    expect(pgs).toBe(require.resolve('pg-protocol/dist/parser'));
  });

  it('answers a row with a value too long for a string with a marked row, and parses on', () => {
    // One character past V8's longest string: the smallest value that cannot be read.
    const [row, after] = parse(dataRowOf(MAX_VALUE_CHARS + 1), commandComplete);
    expect(isOversizedRow(row)).toBe(true);
    expect(row).toMatchObject({ name: 'dataRow', fields: [] });
    expect(after).toMatchObject({ name: 'commandComplete', text: 'SELECT 1' });
  });

  it('reads an error whose message is too long for a string cut short, its other fields whole', () => {
    // `RAISE EXCEPTION '%', repeat('x', 536870889)` (a notice takes the same way): about 0.5 GB
    // here while it lasts.
    const head = Buffer.from('ESERROR\0CP0001\0M', 'latin1');
    const error = Buffer.alloc(head.length + 4 + MAX_VALUE_CHARS + 1 + 2, 'x');
    head.copy(error, 5, 1);
    error.write('E', 0, 'latin1');
    error.writeUInt32BE(error.length - 1, 1);
    error.writeUInt16BE(0, error.length - 2);
    const [msg, after] = parse(error, commandComplete);
    expect(msg).toMatchObject({ name: 'error', severity: 'ERROR', code: 'P0001' });
    expect(msg.message).toBe('x'.repeat(64 * 1024) + ' …');
    expect(after).toMatchObject({ name: 'commandComplete', text: 'SELECT 1' });
  });

  it('leaves rows that fit alone', () => {
    const value = Buffer.from('hello');
    const body = Buffer.alloc(2 + 4 + value.length);
    body.writeInt16BE(1, 0);
    body.writeInt32BE(value.length, 2);
    value.copy(body, 6);
    const [row] = parse(message('D', body));
    expect(isOversizedRow(row)).toBe(false);
    expect(row).toMatchObject({ name: 'dataRow', fields: ['hello'] });
  });

  it('knows the errors of a string made too long, by Node and by V8', () => {
    let decoded: unknown;
    try {
      Buffer.alloc(MAX_VALUE_CHARS + 1).toString('utf8');
    } catch (err) {
      decoded = err;
    }
    expect(isStringTooLong(decoded)).toBe(true);
    let built: unknown;
    try {
      'x'.repeat(MAX_VALUE_CHARS + 1);
    } catch (err) {
      built = err;
    }
    expect(isStringTooLong(built)).toBe(true);
    expect(isStringTooLong(new RangeError('Invalid array length'))).toBe(false);
  });
});
