/*
 * The RLE / bit-packed hybrid of Parquet's Encodings.md, which carries both the levels of a data
 * page and the indices of a dictionary-encoded one.
 * https://github.com/apache/parquet-format/blob/master/Encodings.md
 */

/** Widest values `rleHybrid` packs: bit operations on 32-bit integers hold 7 pending bits + 24. */
export const MAX_RLE_BIT_WIDTH = 24;

/** Bits that hold every value up to `max` (0 when every value is 0). */
export function bitWidth(max: number): number {
  return max === 0 ? 0 : 32 - Math.clz32(max);
}

/**
 * `values[0, count)` as the hybrid's runs, without a length prefix: runs of 8 or more equal values
 * are RLE runs, the rest is bit-packed in groups of 8 (the last group padded with zeros). Every
 * value must fit in `width` bits (0 to MAX_RLE_BIT_WIDTH).
 */
export function rleHybrid(values: ArrayLike<number>, count: number, width: number): Buffer {
  return withRuns(0, { values, count, width }, () => undefined);
}

/** Levels of a v1 data page: a 4-byte length, then the hybrid's runs. */
export function levels(values: Uint8Array, count: number, width: 1 | 2): Buffer {
  return withRuns(4, { values, count, width }, (out, runs) => out.writeUInt32LE(runs, 0));
}

/** Indices of a dictionary-encoded data page: one byte of bit width, then the hybrid's runs. */
export function dictionaryIndices(indices: Uint32Array, count: number, width: number): Buffer {
  return withRuns(1, { values: indices, count, width }, (out) => (out[0] = width));
}

interface Runs {
  values: ArrayLike<number>;
  count: number;
  width: number;
}

/** The runs written after `prefix` bytes that `writePrefix` fills once the runs' length is known. */
function withRuns(
  prefix: number,
  { values, count, width }: Runs,
  writePrefix: (out: Buffer, runs: number) => unknown,
): Buffer {
  if (width < 0 || width > MAX_RLE_BIT_WIDTH) throw new Error(`bit width ${width} out of range`);
  const valueBytes = (width + 7) >> 3;
  // bit-packed: `width` bytes per 8 values and a header byte; RLE: at most 5 + 3 bytes per 8 values
  const out = Buffer.allocUnsafe(prefix + 16 + count + (count >> 3) * (width + 1) + width);
  let at = prefix;
  const runAt = (i: number): number => {
    let j = i + 1;
    while (j < count && values[j] === values[i]) j++;
    return j - i;
  };
  let i = 0;
  while (i < count) {
    const run = runAt(i);
    if (run >= 8) {
      at = varint(out, at, run * 2);
      for (let b = 0, v = values[i]; b < valueBytes; b++, v >>>= 8) out[at++] = v & 0xff;
      i += run;
      continue;
    }
    // up to 63 groups of 8 (a one-byte header), until a long run starts on a group boundary
    const start = i;
    let groups = 0;
    do {
      i += 8;
      groups++;
    } while (i < count && groups < 63 && runAt(i) < 8);
    out[at++] = (groups << 1) | 1;
    let acc = 0;
    let bits = 0;
    for (let k = start; k < start + groups * 8; k++) {
      acc |= (k < count ? values[k] : 0) << bits;
      bits += width;
      while (bits >= 8) {
        out[at++] = acc & 0xff;
        acc >>>= 8;
        bits -= 8;
      }
    }
  }
  writePrefix(out, at - prefix);
  return out.subarray(0, at);
}

function varint(out: Buffer, at: number, value: number): number {
  let v = value;
  while (v >= 0x80) {
    out[at++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  out[at++] = v;
  return at;
}
