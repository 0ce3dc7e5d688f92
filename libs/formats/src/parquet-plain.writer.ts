import { ParquetStatistics } from './parquet-statistics';
import {
  PgValueKind,
  decodeDate,
  decodeInt64,
  decodeTime,
  decodeTimestampInt64,
  decodeUuid,
  utf8Room,
  writeBytea,
  writeUtf8,
} from './pg-text.decoder';
import { utf8Text } from './row.batch';

const TWO_32 = 4294967296;

/** An integer as PostgreSQL prints it (an optional minus, then digits), read from its bytes. */
function readInteger(bytes: Buffer, start: number, end: number): number {
  const negative = bytes[start] === 0x2d;
  let n = 0;
  for (let i = negative ? start + 1 : start; i < end; i++) n = n * 10 + (bytes[i] - 48);
  return negative ? -n : n;
}
const INITIAL_BYTES = 1 << 14;

/** What a column's values are and where their bounds are counted. */
export interface PlainValueKind {
  kind: PgValueKind;
  /** Set only for json columns of composites and hstore, whose text is not JSON yet. */
  toJson: ((text: string) => string) | undefined;
  stats: ParquetStatistics;
}

/**
 * PLAIN-encodes PostgreSQL text values of one kind into a growing buffer: the values of a PLAIN data
 * page, or the entries of a dictionary page. Every value written is counted in the statistics.
 */
export class ParquetPlainWriter {
  private buf: Buffer = Buffer.allocUnsafe(INITIAL_BYTES);
  private view: DataView = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.length);
  private len = 0;
  private bits = 0;

  constructor(private readonly value: PlainValueKind) {}

  /** Bytes written. */
  get length(): number {
    return this.len;
  }

  /** The bytes written; valid until the next write or `clear`. */
  bytes(): Buffer {
    return this.buf.subarray(0, this.len);
  }

  /** Starts over; a buffer grown past `keepBytes` (by a huge value) is given back. */
  clear(keepBytes: number): void {
    this.len = 0;
    this.bits = 0;
    if (this.buf.length > keepBytes) this.setBuffer(Buffer.allocUnsafe(INITIAL_BYTES));
  }

  /** Appends bytes already PLAIN-encoded (a dictionary entry), not counted again in statistics. */
  copy(from: Buffer, start: number, end: number): void {
    this.ensure(end - start);
    from.copy(this.buf, this.len, start, end);
    this.len += end - start;
  }

  /**
   * Writes one non-null value given as its well-formed UTF-8 text, `from[start, end)`: text and
   * JSON (whose text is JSON already) copied, integers and booleans read from the digits, any
   * other value decoded to its text first.
   */
  putBytes(from: Buffer, start: number, end: number): void {
    const { kind, toJson } = this.value;
    switch (kind) {
      case 'text':
      case 'json':
        if (toJson === undefined) return this.copyBytes(from, start, end);
        break;
      case 'int16':
      case 'int32': {
        const n = readInteger(from, start, end);
        this.ensure(4);
        this.view.setInt32(this.len, n, true);
        this.len += 4;
        this.value.stats.number(n);
        return;
      }
      case 'int64':
        // Up to 15 characters a double holds exactly, as decodeInt64 decides.
        if (end - start <= 15) return this.putInt64(readInteger(from, start, end));
        break;
      case 'bool': {
        if ((this.bits & 7) === 0) {
          this.ensure(1);
          this.buf[this.len++] = 0;
        }
        const v = end - start === 1 && from[start] === 0x74 ? 1 : 0; // 't'
        this.buf[this.len - 1] |= v << (this.bits & 7);
        this.bits++;
        this.value.stats.number(v);
        return;
      }
      default:
        break;
    }
    this.put(utf8Text(from, start, end));
  }

  private copyBytes(from: Buffer, start: number, end: number): void {
    const n = end - start;
    this.ensure(4 + n);
    const buf = this.buf;
    const at = this.len + 4;
    // Values are short: a loop beats copy()'s call into C++ below a few hundred bytes.
    if (n < 256) for (let i = 0; i < n; i++) buf[at + i] = from[start + i];
    else from.copy(buf, at, start, end);
    this.view.setUint32(this.len, n, true);
    this.value.stats.bytes(buf, at, at + n);
    this.len = at + n;
  }

  /** Writes one non-null value. */
  put(text: string): void {
    const stats = this.value.stats;
    switch (this.value.kind) {
      case 'int16':
      case 'int32': {
        const n = Number(text);
        this.ensure(4);
        this.view.setInt32(this.len, n, true);
        this.len += 4;
        stats.number(n);
        return;
      }
      case 'date': {
        const n = decodeDate(text);
        this.ensure(4);
        this.view.setInt32(this.len, n, true);
        this.len += 4;
        stats.number(n);
        return;
      }
      case 'int64':
        return this.putInt64(decodeInt64(text));
      case 'timestamp':
      case 'timestamptz':
        return this.putInt64(decodeTimestampInt64(text));
      case 'time':
        return this.putInt64(decodeTime(text));
      case 'float32': {
        const n = Math.fround(Number(text));
        this.ensure(4);
        this.view.setFloat32(this.len, n, true);
        this.len += 4;
        stats.float(n);
        return;
      }
      case 'float64': {
        const n = Number(text);
        this.ensure(8);
        this.view.setFloat64(this.len, n, true);
        this.len += 8;
        stats.float(n);
        return;
      }
      case 'bool': {
        if ((this.bits & 7) === 0) {
          this.ensure(1);
          this.buf[this.len++] = 0;
        }
        const v = text === 't' ? 1 : 0;
        this.buf[this.len - 1] |= v << (this.bits & 7);
        this.bits++;
        stats.number(v);
        return;
      }
      case 'text':
      case 'json': {
        const toJson = this.value.toJson;
        const value = toJson === undefined ? text : toJson(text);
        this.ensure(4 + utf8Room(value));
        const n = writeUtf8(this.buf, value, this.len + 4);
        this.view.setUint32(this.len, n, true);
        stats.bytes(this.buf, this.len + 4, this.len + 4 + n);
        this.len += 4 + n;
        return;
      }
      case 'bytea': {
        this.ensure(4 + text.length);
        const n = writeBytea(this.buf, text, this.len + 4);
        this.view.setUint32(this.len, n, true);
        stats.bytes(this.buf, this.len + 4, this.len + 4 + n);
        this.len += 4 + n;
        return;
      }
      case 'uuid':
        this.ensure(16);
        decodeUuid(text, this.buf, this.len);
        stats.bytes(this.buf, this.len, this.len + 16);
        this.len += 16;
        return;
    }
  }

  private putInt64(v: number | bigint): void {
    this.ensure(8);
    if (typeof v === 'number') {
      const hi = Math.floor(v / TWO_32);
      this.view.setUint32(this.len, v - hi * TWO_32, true);
      this.view.setInt32(this.len + 4, hi, true);
    } else {
      this.view.setBigInt64(this.len, v, true);
    }
    this.len += 8;
    this.value.stats.number(v);
  }

  private ensure(extra: number): void {
    const need = this.len + extra;
    if (need <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(need, this.buf.length * 2));
    this.buf.copy(next, 0, 0, this.len);
    this.setBuffer(next);
  }

  private setBuffer(buf: Buffer): void {
    this.buf = buf;
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.length);
  }
}
