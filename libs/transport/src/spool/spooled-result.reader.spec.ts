import { Readable } from 'node:stream';
import type { ResultRecord } from '@app/contracts';
import type { ResultReader } from '../result.channel';
import { ResultSpool, SpoolMissingError } from './result.spool';
import { SpooledResultReader } from './spooled-result.reader';

const OK = { reason: 'OK', sql_state: '00000', vendor_code: 0 };

/** A reader of records that name two segments of 4 bytes each, then end. */
function listing(): ResultReader {
  const records: ResultRecord[] = [
    {
      kind: 'data',
      rows: 1,
      bytes: Buffer.alloc(0),
      segment: { key: 'q/a.000001', offset: 0, size: 4 },
    },
    {
      kind: 'data',
      rows: 1,
      bytes: Buffer.alloc(0),
      segment: { key: 'q/a.000002', offset: 4, size: 4 },
    },
    { kind: 'end', status: OK, bytes: Buffer.alloc(0) },
  ];
  return {
    next: () => Promise.resolve(records.shift()!),
    cancel: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
}

/** A spool that holds each segment as `held` says, read in pieces of two bytes. */
function spoolHolding(held: Record<string, string>): ResultSpool {
  return {
    read: (key: string, start = 0) => {
      const bytes = Buffer.from(held[key]).subarray(start);
      const pieces = [];
      for (let at = 0; at < bytes.length; at += 2) pieces.push(bytes.subarray(at, at + 2));
      return Promise.resolve(Readable.from(pieces));
    },
  } as unknown as ResultSpool;
}

async function body(reader: ResultReader): Promise<{ bytes: string; failed?: unknown }> {
  let bytes = '';
  try {
    for (;;) {
      const record = await reader.next();
      if (record.kind !== 'error') bytes += record.bytes.toString();
      if (record.kind !== 'data') return { bytes };
    }
  } catch (err) {
    return { bytes, failed: err };
  }
}

describe(SpooledResultReader.name, () => {
  it("gives a spooled result's segments end to end, from a start inside one", async () => {
    const spool = spoolHolding({ 'q/a.000001': 'abcd', 'q/a.000002': 'efgh' });
    expect(await body(new SpooledResultReader(listing(), spool))).toEqual({ bytes: 'abcdefgh' });
    expect(await body(new SpooledResultReader(listing(), spool, 5))).toEqual({ bytes: 'fgh' });
  });

  it('fails a segment the store holds shorter than it was written, after the bytes it had', async () => {
    const spool = spoolHolding({ 'q/a.000001': 'abcd', 'q/a.000002': 'ef' });
    const read = await body(new SpooledResultReader(listing(), spool));
    expect(read.bytes).toBe('abcdef');
    expect(read.failed).toBeInstanceOf(SpoolMissingError);
    expect((read.failed as Error).message).toBe(
      'spooled segment q/a.000002 is shorter in the store than it was written',
    );
  });

  it('fails a segment the store holds longer than it was written, before any byte past its end', async () => {
    const spool = spoolHolding({ 'q/a.000001': 'abcdXY', 'q/a.000002': 'efgh' });
    const read = await body(new SpooledResultReader(listing(), spool));
    expect(read.bytes).toBe('abcd');
    expect((read.failed as Error).message).toBe(
      'spooled segment q/a.000001 is longer in the store than it was written',
    );
  });
});
