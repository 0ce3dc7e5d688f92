import type { ResultRecord } from '@app/contracts';
import type { ResultReader } from '@app/transport';
import { bytesOf, rangeStart } from './kept-result.service';

describe(rangeStart.name, () => {
  it('reads bytes=N- and nothing else', () => {
    expect(rangeStart('bytes=0-')).toBe(0);
    expect(rangeStart(' bytes=1234- ')).toBe(1234);
    for (const other of [
      undefined,
      '',
      'bytes=1-2',
      'bytes=-5',
      'bytes=1-,5-',
      'items=1-',
      'bytes=x-',
    ]) {
      expect(rangeStart(other)).toBeUndefined();
    }
  });

  it('reads a start past 2^53 as past every body (416), not as no Range at all', () => {
    expect(rangeStart('bytes=9007199254740991-')).toBe(9007199254740991);
    for (const huge of [
      'bytes=9007199254740992-',
      'bytes=9999999999999999-',
      `bytes=${'9'.repeat(400)}-`,
    ]) {
      expect(rangeStart(huge)).toBe(Number.POSITIVE_INFINITY);
    }
    expect(rangeStart('bytes=0000000000000000000012-')).toBe(12);
  });
});

describe(bytesOf.name, () => {
  const status = { reason: 'gone', sql_state: '57014', vendor_code: -900 };

  /** A reader that gives `records` in turn; `closed` once it was closed. */
  function readerOf(records: ResultRecord[]): ResultReader & { closed: boolean } {
    const reader = {
      closed: false,
      next: () => Promise.resolve(records.shift()!),
      cancel: () => Promise.resolve(),
      close: () => {
        reader.closed = true;
        return Promise.resolve();
      },
    };
    return reader;
  }

  async function read(reader: ResultReader): Promise<{ bytes: string; failed?: string }> {
    let bytes = '';
    try {
      for await (const piece of bytesOf(reader)) bytes += piece.toString();
    } catch (err) {
      return { bytes, failed: (err as Error).message };
    }
    return { bytes };
  }

  it('gives the bytes to the end of a result that ends well', async () => {
    const reader = readerOf([
      { kind: 'data', rows: 1, bytes: Buffer.from('ab') },
      {
        kind: 'end',
        status: { reason: 'OK', sql_state: '00000', vendor_code: 0 },
        bytes: Buffer.from('c'),
      },
    ]);
    expect(await read(reader)).toEqual({ bytes: 'abc' });
    expect(reader.closed).toBe(true);
  });

  it('fails a result that fails or is cut short after its first bytes: never a short body as if whole', async () => {
    const failing = readerOf([
      { kind: 'data', rows: 1, bytes: Buffer.from('ab') },
      { kind: 'error', status },
    ]);
    expect(await read(failing)).toEqual({ bytes: 'ab', failed: 'result failed: gone' });
    expect(failing.closed).toBe(true);
    const cut = readerOf([
      { kind: 'data', rows: 1, bytes: Buffer.from('ab') },
      { kind: 'end', status, bytes: Buffer.alloc(0), abort: true },
    ]);
    expect(await read(cut)).toEqual({ bytes: 'ab', failed: 'result cut short: gone' });
  });
});
