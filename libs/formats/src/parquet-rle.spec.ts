import { bitWidth, dictionaryIndices, levels, rleHybrid } from './parquet-rle';

/** A reader of the hybrid written from Encodings.md, to check what the writer's runs hold. */
function decode(runs: Buffer, width: number, count: number): number[] {
  const out: number[] = [];
  let at = 0;
  while (out.length < count) {
    let header = 0;
    for (let shift = 0; ; shift += 7) {
      const b = runs[at++];
      header += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
    }
    if (header % 2 === 0) {
      let value = 0;
      for (let b = 0; b < (width + 7) >> 3; b++) value += runs[at++] * 2 ** (8 * b);
      for (let k = 0; k < header / 2; k++) out.push(value);
    } else {
      const n = ((header - 1) / 2) * 8;
      let bit = at * 8;
      for (let k = 0; k < n; k++) {
        let value = 0;
        for (let b = 0; b < width; b++, bit++) value |= ((runs[bit >> 3] >> (bit & 7)) & 1) << b;
        out.push(value);
      }
      at += (n * width) / 8;
    }
  }
  expect(at).toBe(runs.length);
  return out.slice(0, count);
}

describe('parquet RLE / bit-packed hybrid', () => {
  it("bit-packs 0 to 7 with bit width 3 as the specification's example", () => {
    // Encodings.md: 10001000 11000110 11111010, after the header of one group of 8
    expect([...rleHybrid([0, 1, 2, 3, 4, 5, 6, 7], 8, 3)]).toEqual([0x03, 0x88, 0xc6, 0xfa]);
  });

  it('writes a run of 8 or more as RLE: its length shifted left, then the value in whole bytes', () => {
    expect([...rleHybrid(Array(10).fill(4), 10, 3)]).toEqual([0x14, 0x04]);
    // 300 << 1 = 600 as a varint; 0x102 needs 9 bits, so two little-endian bytes
    expect([...rleHybrid(Array(300).fill(0x102), 300, 9)]).toEqual([0xd8, 0x04, 0x02, 0x01]);
    expect([...rleHybrid(Array(20).fill(0xabcdef), 20, 24)]).toEqual([0x28, 0xef, 0xcd, 0xab]);
  });

  it('writes bit width 0 (a dictionary of one value) with no value bytes', () => {
    expect([...rleHybrid(Array(9).fill(0), 9, 0)]).toEqual([0x12]);
    expect([...rleHybrid([0, 0, 0], 3, 0)]).toEqual([0x03]);
  });

  it('pads the last bit-packed group with zeros', () => {
    // 1, 2, 3 at width 2: 01 10 11 00 | 00 00 00 00
    expect([...rleHybrid([1, 2, 3], 3, 2)]).toEqual([0x03, 0b00111001, 0x00]);
  });

  it.each([1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 20, 24])(
    'round-trips runs and mixed values at bit width %i',
    (width) => {
      let seed = width;
      const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
      const max = 2 ** width - 1;
      const values: number[] = [];
      while (values.length < 5000) {
        const v = Math.floor(random() * (max + 1));
        const n = random() < 0.2 ? 8 + Math.floor(random() * 40) : 1 + Math.floor(random() * 6);
        for (let k = 0; k < n; k++) values.push(random() < 0.5 ? v : Math.floor(random() * max));
      }
      values.push(max, 0, max);
      expect(decode(rleHybrid(values, values.length, width), width, values.length)).toEqual(values);
    },
  );

  it('refuses a bit width it cannot pack', () => {
    expect(() => rleHybrid([1], 1, 25)).toThrow('bit width 25 out of range');
  });

  it('prefixes levels with their length and indices with their bit width', () => {
    expect([...levels(new Uint8Array(10).fill(1), 10, 1)]).toEqual([2, 0, 0, 0, 0x14, 0x01]);
    expect([...dictionaryIndices(Uint32Array.from([0, 1, 2, 3, 4, 5, 6, 7]), 8, 3)]).toEqual([
      3, 0x03, 0x88, 0xc6, 0xfa,
    ]);
  });

  it('counts the bits of the largest index', () => {
    expect([0, 1, 2, 3, 4, 255, 256, 65535, 65536].map(bitWidth)).toEqual([
      0, 1, 2, 2, 3, 8, 9, 16, 17,
    ]);
  });
});
