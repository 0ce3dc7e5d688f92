import type { ChunkStatistics, PhysicalType } from './parquet-format';

/** Longest min or max of a byte-array column kept as it is; a longer one is cut (and marked inexact). */
export const STATISTICS_BYTES = 64;
/** Room for a bound: a cut max whose last character became the next one may be a byte longer. */
const BOUND_BYTES = STATISTICS_BYTES + 4;

/** How a byte array is compared and cut: UTF-8 text is cut on a character boundary. */
export type BytesOrder = 'utf8' | 'binary';

/**
 * min, max and null count of one column chunk, in the order parquet.thrift's ColumnOrder
 * (TYPE_ORDER) defines for the column's type: integers, dates, times and timestamps signed, floats
 * by value with NaN left out, booleans false < true, byte arrays (strings, JSON, bytea, UUID) as
 * unsigned bytes. Byte-array bounds longer than STATISTICS_BYTES are cut as the spec allows, so a
 * chunk never holds on to a large value: min becomes its prefix, max its prefix incremented.
 */
export class ParquetStatistics {
  nulls = 0;
  private min: number | bigint | undefined;
  private max: number | bigint | undefined;
  // Byte-array bounds, copied into buffers of their own: a rising column (ids in text, JSON with
  // a growing key) has a new max at every value, and a Buffer made for each took a fifth of the
  // encode. Length -1: no bound yet.
  private minBytes = Buffer.allocUnsafe(BOUND_BYTES);
  private minLength = -1;
  private maxBytes = Buffer.allocUnsafe(BOUND_BYTES);
  private maxLength = -1;
  private minExact = true;
  private maxExact = true;
  // Some value is above every bound that fits (a long run of 0xff, or U+10FFFF): no max.
  private maxUnbounded = false;

  constructor(
    private readonly type: PhysicalType,
    private readonly order: BytesOrder,
  ) {}

  /** An integer, date, time or timestamp (as number or bigint), or a boolean as 0/1. */
  number(v: number | bigint): void {
    if (this.min === undefined || v < this.min) this.min = v;
    if (this.max === undefined || v > this.max) this.max = v;
  }

  /** A float or double (float32 values rounded to single precision by the caller). */
  float(v: number): void {
    // NaN is unordered: the spec leaves it out of min and max.
    if (Number.isNaN(v)) return;
    this.number(v);
  }

  /** A byte-array value, `buf[from, to)`. */
  bytes(buf: Buffer, from: number, to: number): void {
    if (this.minLength < 0 || compare(buf, from, to, this.minBytes, this.minLength) < 0) {
      this.setMin(buf, from, to);
    }
    if (this.maxUnbounded) return;
    if (this.maxLength < 0 || compare(buf, from, to, this.maxBytes, this.maxLength) > 0) {
      this.setMax(buf, from, to);
    }
  }

  /** The chunk's statistics; starts over for the next chunk. */
  take(): ChunkStatistics {
    const stats: ChunkStatistics = {
      nullCount: this.nulls,
      minExact: this.minExact,
      maxExact: this.maxExact,
    };
    if (this.min !== undefined && this.max !== undefined) {
      stats.min = plain(this.type, this.min, -0);
      stats.max = plain(this.type, this.max, 0);
    } else if (this.minLength >= 0) {
      stats.min = Buffer.from(this.minBytes.subarray(0, this.minLength));
      if (this.maxLength >= 0) stats.max = Buffer.from(this.maxBytes.subarray(0, this.maxLength));
    }
    this.nulls = 0;
    this.min = this.max = undefined;
    this.minLength = this.maxLength = -1;
    this.minExact = this.maxExact = true;
    this.maxUnbounded = false;
    return stats;
  }

  private setMin(buf: Buffer, from: number, to: number): void {
    const cut = this.cutAt(buf, from, to);
    this.minLength = copyBound(this.minBytes, buf, from, cut);
    this.minExact = cut === to;
  }

  private setMax(buf: Buffer, from: number, to: number): void {
    const cut = this.cutAt(buf, from, to);
    if (cut === to) {
      this.maxLength = copyBound(this.maxBytes, buf, from, to);
      this.maxExact = true;
      return;
    }
    const above = this.order === 'utf8' ? utf8Above(buf, from, cut) : bytesAbove(buf, from, cut);
    if (above === undefined) {
      this.maxUnbounded = true;
      this.maxLength = -1;
      return;
    }
    if (above.length > this.maxBytes.length) this.maxBytes = Buffer.allocUnsafe(above.length);
    this.maxLength = copyBound(this.maxBytes, above, 0, above.length);
    this.maxExact = false;
  }

  /** Where a bound of `buf[from, to)` ends: all of it when short, else a prefix (whole characters). */
  private cutAt(buf: Buffer, from: number, to: number): number {
    if (to - from <= STATISTICS_BYTES) return to;
    let cut = from + STATISTICS_BYTES;
    if (this.order === 'utf8') while (cut > from && (buf[cut] & 0xc0) === 0x80) cut--;
    return cut;
  }
}

/** Unsigned byte order of `buf[from, to)` against the bound `bound[0, length)`. */
function compare(buf: Buffer, from: number, to: number, bound: Buffer, length: number): number {
  const n = Math.min(to - from, length);
  for (let i = 0; i < n; i++) {
    const d = buf[from + i] - bound[i];
    if (d !== 0) return d;
  }
  return to - from - length;
}

/** Copies `buf[from, to)` (a bound: at most BOUND_BYTES) to the start of `bound`; its length. */
function copyBound(bound: Buffer, buf: Buffer, from: number, to: number): number {
  for (let i = from; i < to; i++) bound[i - from] = buf[i];
  return to - from;
}

/** The shortest bytes above every value that starts with `buf[from, cut)`: its last byte below 0xff, plus one. */
function bytesAbove(buf: Buffer, from: number, cut: number): Buffer | undefined {
  for (let i = cut - 1; i >= from; i--) {
    if (buf[i] !== 0xff) {
      const out = Buffer.from(buf.subarray(from, i + 1));
      out[out.length - 1]++;
      return out;
    }
  }
  return undefined;
}

/**
 * UTF-8 above every string that starts with `buf[from, cut)`: its last character that has a next
 * one, made that next one (UTF-8's byte order is code point order, so the result stays valid text).
 */
function utf8Above(buf: Buffer, from: number, cut: number): Buffer | undefined {
  const chars = Array.from(buf.toString('utf8', from, cut));
  for (let i = chars.length - 1; i >= 0; i--) {
    let next = (chars[i].codePointAt(0) as number) + 1;
    if (next >= 0xd800 && next <= 0xdfff) next = 0xe000; // surrogates are not characters
    if (next <= 0x10ffff) {
      return Buffer.from(chars.slice(0, i).join('') + String.fromCodePoint(next), 'utf8');
    }
  }
  return undefined;
}

/** A numeric bound, PLAIN-encoded; a zero bound of a float is written with the sign `zero` has. */
function plain(type: PhysicalType, v: number | bigint, zero: number): Buffer {
  switch (type) {
    case 'BOOLEAN':
      return Buffer.from([Number(v)]);
    case 'INT32': {
      const b = Buffer.allocUnsafe(4);
      b.writeInt32LE(Number(v));
      return b;
    }
    case 'INT64': {
      const b = Buffer.allocUnsafe(8);
      b.writeBigInt64LE(BigInt(v));
      return b;
    }
    case 'FLOAT': {
      // -0 and +0 compare equal: min -0 and max +0 bound both (parquet.thrift's ColumnOrder)
      const b = Buffer.allocUnsafe(4);
      b.writeFloatLE(v === 0 ? zero : Number(v));
      return b;
    }
    case 'DOUBLE': {
      const b = Buffer.allocUnsafe(8);
      b.writeDoubleLE(v === 0 ? zero : Number(v));
      return b;
    }
    case 'BYTE_ARRAY':
    case 'FIXED_LEN_BYTE_ARRAY':
      throw new Error('byte-array bounds are kept as bytes');
  }
}
