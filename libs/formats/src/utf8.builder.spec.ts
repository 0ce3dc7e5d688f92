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
});
