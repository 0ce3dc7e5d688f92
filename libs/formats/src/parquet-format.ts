import type { ChunkStatistics } from './parquet-statistics';
import { ParquetThriftWriter, TType } from './parquet-thrift.writer';

/*
 * The parts of the Parquet format (parquet.thrift) that Sluice writes: field ids and enum values
 * are the specification's. https://github.com/apache/parquet-format/blob/master/src/main/thrift/parquet.thrift
 */

const PHYSICAL = {
  BOOLEAN: 0,
  INT32: 1,
  INT64: 2,
  FLOAT: 4,
  DOUBLE: 5,
  BYTE_ARRAY: 6,
  FIXED_LEN_BYTE_ARRAY: 7,
} as const;
export type PhysicalType = keyof typeof PHYSICAL;

const REPETITION = { REQUIRED: 0, OPTIONAL: 1, REPEATED: 2 } as const;

const CONVERTED = {
  UTF8: 0,
  LIST: 3,
  DATE: 6,
  TIMESTAMP_MICROS: 10,
  INT_16: 16,
  JSON: 19,
} as const;
export type ConvertedType = keyof typeof CONVERTED;

const CODEC = { UNCOMPRESSED: 0, SNAPPY: 1, GZIP: 2, ZSTD: 6 } as const;
export type Codec = keyof typeof CODEC;

const ENCODING = { PLAIN: 0, RLE: 3 } as const;

export type LogicalType =
  | { type: 'STRING' | 'LIST' | 'DATE' | 'JSON' | 'UUID' }
  | { type: 'TIME' | 'TIMESTAMP'; utc: boolean } // always microseconds
  | { type: 'INTEGER'; bitWidth: 8 | 16 | 32 | 64; signed: boolean };

export interface SchemaElement {
  name: string;
  type?: PhysicalType;
  typeLength?: number;
  repetition?: keyof typeof REPETITION;
  numChildren?: number;
  convertedType?: ConvertedType;
  logicalType?: LogicalType;
}

export interface ColumnChunkMeta {
  type: PhysicalType;
  path: string[];
  codec: Codec;
  /** Level entries (values and nulls, list elements included). */
  numValues: number;
  uncompressedSize: number;
  compressedSize: number;
  /** Where the chunk (its first data page) starts in the file. */
  offset: number;
  statistics: ChunkStatistics;
}

export interface RowGroupMeta {
  columns: ColumnChunkMeta[];
  numRows: number;
  totalByteSize: number;
  offset: number;
  compressedSize: number;
}

export interface FileMeta {
  schema: SchemaElement[];
  numRows: number;
  rowGroups: RowGroupMeta[];
  keyValue: [string, string][];
  createdBy: string;
}

/** A v1 data page header: PLAIN values, RLE levels. */
export function pageHeader(
  w: ParquetThriftWriter,
  numValues: number,
  uncompressedSize: number,
  compressedSize: number,
): Buffer {
  w.structBegin()
    .i32(1, 0) // DATA_PAGE
    .i32(2, uncompressedSize)
    .i32(3, compressedSize)
    .struct(5)
    .i32(1, numValues)
    .i32(2, ENCODING.PLAIN)
    .i32(3, ENCODING.RLE)
    .i32(4, ENCODING.RLE)
    .structEnd()
    .structEnd();
  return w.take();
}

/** The FileMetaData struct (the footer, without its length and magic). */
export function fileMetaData(w: ParquetThriftWriter, meta: FileMeta): Buffer {
  w.structBegin().i32(1, 2).list(2, TType.STRUCT, meta.schema.length);
  for (const e of meta.schema) schemaElement(w, e);
  w.i64(3, meta.numRows).list(4, TType.STRUCT, meta.rowGroups.length);
  for (const g of meta.rowGroups) rowGroup(w, g);
  w.list(5, TType.STRUCT, meta.keyValue.length);
  for (const [key, value] of meta.keyValue)
    w.structBegin().binary(1, key).binary(2, value).structEnd();
  w.binary(6, meta.createdBy);
  // ColumnOrder per leaf: TYPE_ORDER, so that readers trust min/max
  const leaves = meta.schema.filter((e) => e.type !== undefined).length;
  w.list(7, TType.STRUCT, leaves);
  for (let i = 0; i < leaves; i++) w.structBegin().struct(1).structEnd().structEnd();
  w.structEnd();
  return w.take();
}

function schemaElement(w: ParquetThriftWriter, e: SchemaElement): void {
  w.structBegin()
    .i32(1, e.type === undefined ? undefined : PHYSICAL[e.type])
    .i32(2, e.typeLength)
    .i32(3, e.repetition === undefined ? undefined : REPETITION[e.repetition])
    .binary(4, e.name)
    .i32(5, e.numChildren)
    .i32(6, e.convertedType === undefined ? undefined : CONVERTED[e.convertedType]);
  if (e.logicalType) logicalType(w.struct(10), e.logicalType).structEnd();
  w.structEnd();
}

/** The LogicalType union's member. */
function logicalType(w: ParquetThriftWriter, t: LogicalType): ParquetThriftWriter {
  switch (t.type) {
    case 'STRING':
      return w.struct(1).structEnd();
    case 'LIST':
      return w.struct(3).structEnd();
    case 'DATE':
      return w.struct(6).structEnd();
    case 'TIME':
    case 'TIMESTAMP':
      // TimeUnit union: 2 = MICROS
      return w
        .struct(t.type === 'TIME' ? 7 : 8)
        .bool(1, t.utc)
        .struct(2)
        .struct(2)
        .structEnd()
        .structEnd()
        .structEnd();
    case 'INTEGER':
      return w.struct(10).i8(1, t.bitWidth).bool(2, t.signed).structEnd();
    case 'JSON':
      return w.struct(12).structEnd();
    case 'UUID':
      return w.struct(14).structEnd();
  }
}

function rowGroup(w: ParquetThriftWriter, g: RowGroupMeta): void {
  w.structBegin().list(1, TType.STRUCT, g.columns.length);
  for (const c of g.columns) {
    w.structBegin().i64(2, c.offset).struct(3);
    w.i32(1, PHYSICAL[c.type]).list(2, TType.I32, 2);
    w.elementI32(ENCODING.PLAIN).elementI32(ENCODING.RLE);
    w.list(3, TType.BINARY, c.path.length);
    for (const p of c.path) w.elementBinary(p);
    w.i32(4, CODEC[c.codec])
      .i64(5, c.numValues)
      .i64(6, c.uncompressedSize)
      .i64(7, c.compressedSize)
      .i64(9, c.offset);
    statistics(w.struct(12), c.statistics).structEnd();
    w.structEnd().structEnd();
  }
  w.i64(2, g.totalByteSize).i64(3, g.numRows).i64(5, g.offset).i64(6, g.compressedSize).structEnd();
}

/** Statistics: null_count, max_value, min_value and whether each bound is a value of the chunk. */
function statistics(w: ParquetThriftWriter, s: ChunkStatistics): ParquetThriftWriter {
  w.i64(3, s.nullCount).binary(5, s.max).binary(6, s.min);
  if (s.max !== undefined) w.bool(7, s.maxExact);
  if (s.min !== undefined) w.bool(8, s.minExact);
  return w;
}

/**
 * Levels of a v1 data page: a 4-byte length, then RLE / bit-packed hybrid runs (`bitWidth` 1
 * or 2). Runs of 8 or more equal levels are RLE; the rest is bit-packed in groups of 8.
 */
export function levels(values: Uint8Array, count: number, bitWidth: 1 | 2): Buffer {
  // at most 3 bytes per 8 levels bit-packed, 6 per 8 or more as a run: a byte per level is room
  const out = Buffer.allocUnsafe(16 + count);
  let at = 4;
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
      out[at++] = values[i];
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
      bits += bitWidth;
      if (bits === 8) {
        out[at++] = acc;
        acc = 0;
        bits = 0;
      }
    }
  }
  out.writeUInt32LE(at - 4, 0);
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
