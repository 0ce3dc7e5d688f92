import { ColumnChunkMeta, PhysicalType, SchemaElement, levels, pageHeader } from './parquet-format';
import { PageCompression, compressPage } from './parquet-page.compressor';
import { ParquetStatistics } from './parquet-statistics';
import { ParquetThriftWriter } from './parquet-thrift.writer';
import {
  PgColumnKind,
  PgValueKind,
  decodeDate,
  decodeInt64,
  decodeTime,
  decodeTimestampInt64,
  decodeUuid,
  flattenArray,
  parseArray,
  utf8Room,
  writeBytea,
  writeUtf8,
} from './pg-text.decoder';
import { TextRow } from './result.encoder';

const TWO_32 = 4294967296;

/** The Parquet schema elements of a column of this kind (a 3-level LIST for arrays). */
export function parquetSchema(name: string, { kind, list }: PgColumnKind): SchemaElement[] {
  const leaf = leafElement(list ? 'element' : name, kind);
  if (!list) return [leaf];
  return [
    {
      name,
      repetition: 'OPTIONAL',
      numChildren: 1,
      convertedType: 'LIST',
      logicalType: { type: 'LIST' },
    },
    { name: 'list', repetition: 'REPEATED', numChildren: 1 },
    leaf,
  ];
}

function leafElement(name: string, kind: PgValueKind): SchemaElement {
  const e: SchemaElement = { name, repetition: 'OPTIONAL' };
  switch (kind) {
    case 'int16':
      return {
        ...e,
        type: 'INT32',
        convertedType: 'INT_16',
        logicalType: { type: 'INTEGER', bitWidth: 16, signed: true },
      };
    case 'int32':
      return { ...e, type: 'INT32' };
    case 'int64':
      return { ...e, type: 'INT64' };
    case 'float32':
      return { ...e, type: 'FLOAT' };
    case 'float64':
      return { ...e, type: 'DOUBLE' };
    case 'bool':
      return { ...e, type: 'BOOLEAN' };
    case 'text':
      return { ...e, type: 'BYTE_ARRAY', convertedType: 'UTF8', logicalType: { type: 'STRING' } };
    case 'json':
      return { ...e, type: 'BYTE_ARRAY', convertedType: 'JSON', logicalType: { type: 'JSON' } };
    case 'date':
      return { ...e, type: 'INT32', convertedType: 'DATE', logicalType: { type: 'DATE' } };
    case 'time':
      // TIME_MICROS would claim isAdjustedToUTC=true: logical type only
      return { ...e, type: 'INT64', logicalType: { type: 'TIME', utc: false } };
    case 'timestamp':
      return { ...e, type: 'INT64', logicalType: { type: 'TIMESTAMP', utc: false } };
    case 'timestamptz':
      return {
        ...e,
        type: 'INT64',
        convertedType: 'TIMESTAMP_MICROS',
        logicalType: { type: 'TIMESTAMP', utc: true },
      };
    case 'uuid':
      return { ...e, type: 'FIXED_LEN_BYTE_ARRAY', typeLength: 16, logicalType: { type: 'UUID' } };
    case 'bytea':
      return { ...e, type: 'BYTE_ARRAY' };
  }
}

export interface ColumnWriterSettings extends PageCompression {
  pageBytes: number;
}

/** A column chunk's pages and what the footer says about them. */
export interface EncodedChunk {
  pages: Buffer[];
  meta: ColumnChunkMeta;
}

/**
 * Encodes one column's text values into Parquet data pages (v1, PLAIN values, RLE levels) for the
 * current row group. Values go straight from PostgreSQL's text into the page buffer; a page is
 * closed once it holds `pageBytes`, and `finishChunk` hands the row group's pages over.
 */
export class ParquetColumnWriter {
  private readonly kind: PgValueKind;
  private readonly list: boolean;
  private readonly toJson: ((text: string) => string) | undefined;
  private readonly delimiter: string;
  private readonly maxDef: number;
  private readonly element: SchemaElement;
  private readonly type: PhysicalType;
  private readonly path: string[];
  private readonly thrift = new ParquetThriftWriter();

  // current page: values and levels
  private buf: Buffer = Buffer.allocUnsafe(1 << 14);
  private view: DataView = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.length);
  private len = 0;
  private bits = 0;
  private defs: Uint8Array = new Uint8Array(1 << 12);
  private reps: Uint8Array | null;
  private levels = 0;

  // current chunk
  private pages: Buffer[] = [];
  private pagesBytes = 0;
  private uncompressed = 0;
  private chunkLevels = 0;
  private readonly stats: ParquetStatistics;

  constructor(
    name: string,
    column: PgColumnKind,
    delimiter: string,
    private readonly settings: ColumnWriterSettings,
  ) {
    this.kind = column.kind;
    this.list = column.list;
    this.toJson = column.toJson;
    this.delimiter = delimiter;
    this.maxDef = column.list ? 3 : 1;
    const schema = parquetSchema(name, column);
    this.element = schema[schema.length - 1];
    this.path = column.list ? [name, 'list', 'element'] : [name];
    this.reps = column.list ? new Uint8Array(1 << 12) : null;
    const type = this.element.type;
    if (type === undefined) throw new Error('a leaf column has a type');
    this.type = type;
    this.stats = new ParquetStatistics(
      type,
      column.kind === 'text' || column.kind === 'json' ? 'utf8' : 'binary',
    );
  }

  /** Bytes of the current row group before compression (closed pages and the open one). */
  get size(): number {
    return this.uncompressed + this.len + (this.levels >> 2);
  }

  /** Appends column `c` of rows [from, to). */
  append(rows: TextRow[], c: number, from: number, to: number): void {
    const pageBytes = this.settings.pageBytes;
    if (this.list) {
      for (let r = from; r < to; r++) {
        this.appendList(rows[r][c]);
        if (this.len >= pageBytes) this.finishPage();
      }
      return;
    }
    for (let r = from; r < to; r++) {
      const v = rows[r][c];
      if (this.levels === this.defs.length) this.defs = grow(this.defs, this.levels + 1);
      if (v === null) {
        this.defs[this.levels++] = 0;
        this.stats.nulls++;
        continue;
      }
      this.defs[this.levels++] = 1;
      this.put(v);
      if (this.len >= pageBytes) this.finishPage();
    }
  }

  private appendList(text: string | null): void {
    const need = this.levels + 1;
    if (need > this.defs.length) this.growLevels(need);
    const reps = this.reps as Uint8Array;
    if (text === null) {
      reps[this.levels] = 0;
      this.defs[this.levels++] = 0;
      this.stats.nulls++;
      return;
    }
    const elements = flattenArray(parseArray(text, this.delimiter));
    if (elements.length === 0) {
      reps[this.levels] = 0;
      this.defs[this.levels++] = 1;
      this.stats.nulls++; // no value at the leaf, as readers count it
      return;
    }
    if (this.levels + elements.length > this.defs.length) {
      this.growLevels(this.levels + elements.length);
    }
    const defs = this.defs;
    const r = this.reps as Uint8Array;
    for (let i = 0; i < elements.length; i++) {
      const e = elements[i];
      r[this.levels] = i === 0 ? 0 : 1;
      if (e === null) {
        defs[this.levels++] = 2;
        this.stats.nulls++;
      } else {
        defs[this.levels++] = 3;
        this.put(e);
      }
    }
  }

  private growLevels(need: number): void {
    this.defs = grow(this.defs, need);
    if (this.reps) this.reps = grow(this.reps, need);
  }

  /** Writes one non-null value, PLAIN-encoded. */
  private put(text: string): void {
    switch (this.kind) {
      case 'int16':
      case 'int32': {
        const n = Number(text);
        this.ensure(4);
        this.view.setInt32(this.len, n, true);
        this.len += 4;
        this.stats.number(n);
        return;
      }
      case 'date': {
        const n = decodeDate(text);
        this.ensure(4);
        this.view.setInt32(this.len, n, true);
        this.len += 4;
        this.stats.number(n);
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
        this.stats.float(n);
        return;
      }
      case 'float64': {
        const n = Number(text);
        this.ensure(8);
        this.view.setFloat64(this.len, n, true);
        this.len += 8;
        this.stats.float(n);
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
        this.stats.number(v);
        return;
      }
      case 'text':
      case 'json': {
        // Set only for json columns of composites and hstore, whose text is not JSON yet.
        const value = this.toJson === undefined ? text : this.toJson(text);
        this.ensure(4 + utf8Room(value));
        const n = writeUtf8(this.buf, value, this.len + 4);
        this.view.setUint32(this.len, n, true);
        this.stats.bytes(this.buf, this.len + 4, this.len + 4 + n);
        this.len += 4 + n;
        return;
      }
      case 'bytea': {
        this.ensure(4 + text.length);
        const n = writeBytea(this.buf, text, this.len + 4);
        this.view.setUint32(this.len, n, true);
        this.stats.bytes(this.buf, this.len + 4, this.len + 4 + n);
        this.len += 4 + n;
        return;
      }
      case 'uuid':
        this.ensure(16);
        decodeUuid(text, this.buf, this.len);
        this.stats.bytes(this.buf, this.len, this.len + 16);
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
    this.stats.number(v);
  }

  private track(v: number | bigint): void {
    this.stats.number(v);
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

  /** Closes the open page: header, levels and values, compressed if asked. */
  private finishPage(): void {
    if (this.levels === 0) return;
    const body: Buffer[] = [];
    if (this.reps) body.push(levels(this.reps, this.levels, 1));
    body.push(levels(this.defs, this.levels, this.maxDef === 3 ? 2 : 1));
    body.push(this.buf.subarray(0, this.len));
    let size = 0;
    for (const b of body) size += b.length;
    const data = compressPage(Buffer.concat(body, size), this.settings);
    const header = pageHeader(this.thrift, this.levels, size, data.length);
    // The page is a copy: the working buffers are reused for the next one.
    this.pages.push(header, data);
    this.pagesBytes += header.length + data.length;
    this.uncompressed += header.length + size;
    this.chunkLevels += this.levels;
    this.levels = 0;
    this.len = 0;
    this.bits = 0;
    // A huge value grew the working buffer: give the memory back.
    if (this.buf.length > 4 * this.settings.pageBytes) this.setBuffer(Buffer.allocUnsafe(1 << 14));
  }

  /**
   * Closes the row group's column chunk, which starts at `offset` in the file, and returns its
   * pages; the writer is then empty (its working buffers are kept for the next row group).
   */
  finishChunk(offset: number): EncodedChunk {
    this.finishPage();
    const result: EncodedChunk = {
      pages: this.pages,
      meta: {
        type: this.type,
        path: this.path,
        codec: this.settings.codec,
        numValues: this.chunkLevels,
        uncompressedSize: this.uncompressed,
        compressedSize: this.pagesBytes,
        offset,
        statistics: this.stats.take(),
      },
    };
    this.pages = [];
    this.pagesBytes = 0;
    this.uncompressed = 0;
    this.chunkLevels = 0;
    return result;
  }

  /** Drops whatever the row group held (a failed result). */
  discard(): void {
    this.pages = [];
    this.pagesBytes = 0;
    this.uncompressed = 0;
    this.levels = 0;
    this.len = 0;
    this.bits = 0;
    this.stats.take();
  }
}

function grow(levels: Uint8Array, need: number): Uint8Array {
  const next = new Uint8Array(Math.max(need, levels.length * 2));
  next.set(levels);
  return next;
}
