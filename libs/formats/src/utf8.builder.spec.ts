import { Utf8Builder } from './utf8.builder';

/** What the encoders gave before the builder: the pieces joined, then Buffer.from. */
const reference = (pieces: string[]): Buffer => Buffer.from(pieces.join(''));

function built(pieces: string[], initialBytes?: number): Buffer {
  const out = new Utf8Builder(initialBytes);
  for (const piece of pieces) out.append(piece);
  return out.take();
}

/** A deterministic mix of ASCII, two-, three- and four-byte characters, of every length. */
function mixedPieces(count: number, seed = 7): string[] {
  const alphabet = ['a', 'Z', '0', '"', '\\', '\n', 'é', 'ß', 'Ж', '€', '中', '😀', '\u0000', ' '];
  let state = seed;
  const next = (n: number) => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state % n;
  };
  const pieces: string[] = [];
  for (let p = 0; p < count; p++) {
    const length = next(5) === 0 ? 200 + next(400) : next(24);
    let piece = '';
    for (let i = 0; i < length; i++) piece += alphabet[next(alphabet.length)];
    pieces.push(piece);
  }
  return pieces;
}

/** Byte for byte; toEqual compares large Buffers a byte at a time, for seconds. */
function expectSameBytes(actual: Buffer, expected: Buffer): void {
  expect(actual.length).toBe(expected.length);
  expect(actual.equals(expected)).toBe(true);
}

describe(Utf8Builder.name, () => {
  it('gives the bytes Buffer.from gives for the pieces joined', () => {
    const pieces = ['[', '1', ',', '"abc"', ',', 'null', ']', '', 'plain ASCII only'];
    expect(built(pieces)).toEqual(reference(pieces));
  });

  it('encodes non-ASCII pieces, short and long, at their start or after ASCII', () => {
    const pieces = [
      'é',
      'abcé',
      '"Zürich"',
      '中文',
      'x😀y',
      '😀',
      'a'.repeat(300) + 'é',
      'é' + 'b'.repeat(300),
      '😀'.repeat(200),
    ];
    expect(built(pieces)).toEqual(reference(pieces));
  });

  it('writes a lone surrogate as Buffer.from does (U+FFFD)', () => {
    const pieces = ['a\uD800b', '\uDC00', 'x'.repeat(260) + '\uD83D'];
    expect(built(pieces)).toEqual(reference(pieces));
  });

  it('grows from a tiny buffer through thousands of mixed pieces', () => {
    const pieces = mixedPieces(5_000);
    expectSameBytes(built(pieces, 1), reference(pieces));
  });

  it('grows for a long value by its bytes, hands a chunk past 4 MiB over and keeps no such buffer', () => {
    const out = new Utf8Builder(16);
    const value = 'é'.repeat(3 * 1024 * 1024);
    out.append('"');
    out.append(value);
    // Two bytes a character: 6 MiB, not the 9 MiB that three bytes a unit would reserve.
    expect(out.capacity).toBeLessThan(7 * 1024 * 1024);
    out.append('"');
    // The closing quote grows it by an eighth, not to twice its size.
    expect(out.capacity).toBeLessThan(8 * 1024 * 1024);
    const big = out.take();
    expectSameBytes(big, Buffer.from(`"${value}"`));
    expect(out.capacity).toBe(16);
    out.append('small');
    expect(out.take().toString()).toBe('small');
    expect(out.capacity).toBe(16);
    // What it handed over is the caller's: the next chunks do not write into it.
    expect(big.subarray(0, 3)).toEqual(Buffer.from('"é'));
  });

  it('starts over after take, and what it gave is not overwritten by the next chunk', () => {
    const out = new Utf8Builder(4);
    out.append('first chunk, é');
    const first = out.take();
    out.append('second');
    const second = out.take();
    expect(first.toString('utf8')).toBe('first chunk, é');
    expect(second.toString('utf8')).toBe('second');
    expect(out.take()).toHaveLength(0);
  });

  describe('given a chunk back (reuse)', () => {
    const chunkOf = (out: Utf8Builder, char: string, bytes: number): Buffer => {
      out.append(char.repeat(bytes));
      return out.take();
    };

    it('copies a later chunk that fits into its memory, and no chunk before it is given back', () => {
      const out = new Utf8Builder();
      const first = chunkOf(out, 'a', 100_000);
      const second = chunkOf(out, 'b', 100_000);
      expect(second.buffer).not.toBe(first.buffer);
      out.reuse(first);
      const third = chunkOf(out, 'c', 90_000);
      expect(third.buffer).toBe(first.buffer);
      expectSameBytes(third, Buffer.from('c'.repeat(90_000)));
      // Taken once: the next chunk has memory of its own again.
      const fourth = chunkOf(out, 'd', 90_000);
      expect([first.buffer, second.buffer]).not.toContain(fourth.buffer);
      expectSameBytes(second, Buffer.from('b'.repeat(100_000)));
    });

    it('takes a later chunk a few rows longer into the memory given back', () => {
      const out = new Utf8Builder();
      const first = chunkOf(out, 'a', 100_000);
      out.reuse(first);
      // Chunks of the same fetch size differ by their rows' widths.
      const longer = chunkOf(out, 'b', 106_000);
      expect(longer.buffer).toBe(first.buffer);
      expectSameBytes(longer, Buffer.from('b'.repeat(106_000)));
    });

    it('takes a larger chunk in new memory, keeping the memory given back for one that fits', () => {
      const out = new Utf8Builder();
      const small = chunkOf(out, 'a', 70_000);
      out.reuse(small);
      const large = chunkOf(out, 'b', 200_000);
      expect(large.buffer).not.toBe(small.buffer);
      expect(chunkOf(out, 'c', 70_000).buffer).toBe(small.buffer);
    });

    it("ignores what it did not make a chunk's own memory of", () => {
      const out = new Utf8Builder();
      // A short chunk (in Node's shared pool), someone else's Buffer, a chunk past 4 MiB (the
      // builder's own buffer, handed over): none is written into after it is given back.
      const short = chunkOf(out, 'a', 100);
      const foreign = Buffer.alloc(200_000, 'z');
      const huge = chunkOf(out, 'h', 5 * 1024 * 1024);
      for (const chunk of [short, foreign, huge]) out.reuse(chunk);
      const next = chunkOf(out, 'n', 150_000);
      expect([short.buffer, foreign.buffer, huge.buffer]).not.toContain(next.buffer);
      expect(short.toString()).toBe('a'.repeat(100));
      expect(foreign.every((b) => b === 0x7a)).toBe(true);
      expect(huge.subarray(0, 4).toString()).toBe('hhhh');
    });
  });
});
