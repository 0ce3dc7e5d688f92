import { UsageError } from './usage.error';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { parseParams, writeAtOffsets } from './client.commands';

describe(parseParams.name, () => {
  it('reads a value as JSON when it is JSON: 42 a number, "42" text, null, true, an object', () => {
    expect(
      parseParams(['n=42', 's="42"', 'none=null', 'yes=true', 'j={"k":[1]}', 'f=1.5']),
    ).toEqual({ n: 42, s: '42', none: null, yes: true, j: { k: [1] }, f: 1.5 });
  });

  it('reads a value that is not JSON as text, everything after the first =', () => {
    expect(parseParams(['s=hello', 'e=a=b', 'broken=[1,', 'empty='])).toEqual({
      s: 'hello',
      e: 'a=b',
      broken: '[1,',
      empty: '',
    });
  });

  it('refuses a pair without a name', () => {
    expect(() => parseParams(['=42'])).toThrow(UsageError);
    expect(() => parseParams(['42'])).toThrow(UsageError);
  });
});

describe('writeAtOffsets', () => {
  it('puts each segment at its offset, in whatever order they come, and counts what it wrote', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-offsets-'));
    try {
      const whole = Buffer.from('abcdefghijklmnopqrstuvwxyz');
      const piece = (from: number, to: number) => new Uint8Array(whole.subarray(from, to));
      // The last segment first, in two parts; the first segment last.
      const segments = Readable.from([
        { offset: 20, parts: [piece(20, 23), piece(23, 26)] },
        { offset: 8, parts: [piece(8, 20)] },
        { offset: 0, parts: [piece(0, 8)] },
      ]);
      const wrote: number[] = [];
      const file = join(dir, 'out');
      await writeAtOffsets(segments, file, (n) => wrote.push(n));
      expect(readFileSync(file).equals(whole)).toBe(true);
      expect(wrote).toEqual([6, 12, 8]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('counts a segment read again from its start once: the progress never passes the file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-offsets-'));
    try {
      const whole = Buffer.from('abcdefghijklmnopqrstuvwxyz');
      const piece = (from: number, to: number) => new Uint8Array(whole.subarray(from, to));
      // The second segment's first try gave a piece, then it came again from its start, in
      // pieces of other sizes; the first segment meanwhile.
      const segments = Readable.from([
        { offset: 10, parts: [piece(10, 15)] },
        { offset: 0, parts: [piece(0, 10)] },
        { offset: 10, parts: [piece(10, 13)] },
        { offset: 13, parts: [piece(13, 26)] },
      ]);
      const wrote: number[] = [];
      const file = join(dir, 'out');
      await writeAtOffsets(segments, file, (n) => wrote.push(n));
      expect(readFileSync(file).equals(whole)).toBe(true);
      expect(wrote).toEqual([5, 10, 0, 11]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
