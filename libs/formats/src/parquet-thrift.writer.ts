/** Thrift compact protocol type ids. */
export enum TType {
  TRUE = 1,
  FALSE = 2,
  BYTE = 3,
  I32 = 5,
  I64 = 6,
  BINARY = 8,
  LIST = 9,
  STRUCT = 12,
}

/**
 * Writes the Thrift compact protocol with every type given explicitly (no guessing from values):
 * what Parquet's page headers and footer need, nothing more.
 */
export class ParquetThriftWriter {
  private buf = Buffer.allocUnsafe(256);
  private len = 0;
  private lastField = 0;
  private readonly stack: number[] = [];

  /** The bytes written so far; the writer starts over. */
  take(): Buffer {
    const out = Buffer.from(this.buf.subarray(0, this.len));
    this.len = 0;
    this.lastField = 0;
    this.stack.length = 0;
    return out;
  }

  structBegin(): this {
    this.stack.push(this.lastField);
    this.lastField = 0;
    return this;
  }

  structEnd(): this {
    this.byte(0); // STOP
    this.lastField = this.stack.pop() ?? 0;
    return this;
  }

  i32(id: number, value: number | undefined): this {
    if (value === undefined) return this;
    this.field(id, TType.I32);
    return this.varint(zigzag(value));
  }

  i64(id: number, value: number | undefined): this {
    if (value === undefined) return this;
    this.field(id, TType.I64);
    return this.varint(zigzag(value));
  }

  i8(id: number, value: number): this {
    this.field(id, TType.BYTE);
    return this.byte(value & 0xff);
  }

  bool(id: number, value: boolean): this {
    return this.field(id, value ? TType.TRUE : TType.FALSE);
  }

  binary(id: number, value: string | Uint8Array | undefined): this {
    if (value === undefined) return this;
    this.field(id, TType.BINARY);
    return this.bytes(value);
  }

  /** A struct field: write its fields, then structEnd(). */
  struct(id: number): this {
    this.field(id, TType.STRUCT);
    return this.structBegin();
  }

  /** A list field's header; then write `size` elements of `type` (structs: structBegin/End). */
  list(id: number, type: TType, size: number): this {
    this.field(id, TType.LIST);
    return this.listHeader(type, size);
  }

  /** A list element of type I32. */
  elementI32(value: number): this {
    return this.varint(zigzag(value));
  }

  /** A list element of type BINARY. */
  elementBinary(value: string | Uint8Array): this {
    return this.bytes(value);
  }

  private listHeader(type: TType, size: number): this {
    if (size < 15) return this.byte((size << 4) | type);
    this.byte(0xf0 | type);
    return this.varint(size);
  }

  private field(id: number, type: TType): this {
    const delta = id - this.lastField;
    if (delta > 0 && delta <= 15) {
      this.byte((delta << 4) | type);
    } else {
      this.byte(type);
      this.varint(zigzag(id));
    }
    this.lastField = id;
    return this;
  }

  private bytes(value: string | Uint8Array): this {
    const data = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
    this.varint(data.length);
    this.ensure(data.length);
    this.buf.set(data, this.len);
    this.len += data.length;
    return this;
  }

  private byte(value: number): this {
    this.ensure(1);
    this.buf[this.len++] = value;
    return this;
  }

  /** Unsigned varint of a non-negative integer up to 2^53 (number arithmetic, no bigint). */
  private varint(value: number): this {
    this.ensure(10);
    let v = value;
    while (v >= 0x80) {
      this.buf[this.len++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.len++] = v;
    return this;
  }

  private ensure(extra: number): void {
    if (this.len + extra <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + extra));
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
  }
}

/** Zigzag of a signed integer within ±2^52, as a number. */
function zigzag(n: number): number {
  return n >= 0 ? n * 2 : -n * 2 - 1;
}
