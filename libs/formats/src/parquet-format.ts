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

/** A column chunk's statistics as the footer writes them: bounds PLAIN-encoded. */
export interface ChunkStatistics {
  nullCount: number;
  min?: Buffer;
  max?: Buffer;
  /** False when `min` is a prefix of the smallest value, not the value itself. */
  minExact: boolean;
  /** False when `max` is larger than every value (a prefix, incremented), not one of them. */
  maxExact: boolean;
}

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

const ENCODING = { PLAIN: 0, RLE: 3, RLE_DICTIONARY: 8 } as const;
/** How a data page's values are written (its levels are always RLE). */
export type ValueEncoding = 'PLAIN' | 'RLE_DICTIONARY';

const PAGE_TYPE = { DATA_PAGE: 0, DICTIONARY_PAGE: 2 } as const;

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
  /** Where the chunk starts in the file: its dictionary page if it has one, else its first data page. */
  offset: number;
  /** Bytes of the dictionary page (header included) at `offset`; 0 without a dictionary. */
  dictionaryPageBytes: number;
  /** Data pages of each value encoding, for the footer's encoding list and encoding_stats. */
  dataPages: Record<ValueEncoding, number>;
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

export interface PageSizes {
  /** Data page: level entries (values and nulls); dictionary page: entries. */
  numValues: number;
  uncompressedSize: number;
  compressedSize: number;
}

/** A v1 data page header: values PLAIN or dictionary indices, RLE levels. */
export function dataPageHeader(
  w: ParquetThriftWriter,
  page: PageSizes & { encoding: ValueEncoding },
): Buffer {
  w.structBegin()
    .i32(1, PAGE_TYPE.DATA_PAGE)
    .i32(2, page.uncompressedSize)
    .i32(3, page.compressedSize)
    .struct(5)
    .i32(1, page.numValues)
    .i32(2, ENCODING[page.encoding])
    .i32(3, ENCODING.RLE)
    .i32(4, ENCODING.RLE)
    .structEnd()
    .structEnd();
  return w.take();
}

/** A dictionary page header: the entries PLAIN, as the format requires. */
export function dictionaryPageHeader(w: ParquetThriftWriter, page: PageSizes): Buffer {
  w.structBegin()
    .i32(1, PAGE_TYPE.DICTIONARY_PAGE)
    .i32(2, page.uncompressedSize)
    .i32(3, page.compressedSize)
    .struct(7)
    .i32(1, page.numValues)
    .i32(2, ENCODING.PLAIN)
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
    const dictionary = c.dictionaryPageBytes > 0;
    w.structBegin().i64(2, c.offset).struct(3).i32(1, PHYSICAL[c.type]);
    // PLAIN for PLAIN data pages or the dictionary page, RLE for levels
    const encodings: number[] = [];
    if (dictionary || c.dataPages.PLAIN > 0) encodings.push(ENCODING.PLAIN);
    encodings.push(ENCODING.RLE);
    if (c.dataPages.RLE_DICTIONARY > 0) encodings.push(ENCODING.RLE_DICTIONARY);
    w.list(2, TType.I32, encodings.length);
    for (const e of encodings) w.elementI32(e);
    w.list(3, TType.BINARY, c.path.length);
    for (const p of c.path) w.elementBinary(p);
    w.i32(4, CODEC[c.codec])
      .i64(5, c.numValues)
      .i64(6, c.uncompressedSize)
      .i64(7, c.compressedSize)
      .i64(9, c.offset + c.dictionaryPageBytes)
      .i64(11, dictionary ? c.offset : undefined);
    statistics(w.struct(12), c.statistics).structEnd();
    encodingStats(w, c);
    w.structEnd().structEnd();
  }
  w.i64(2, g.totalByteSize).i64(3, g.numRows).i64(5, g.offset).i64(6, g.compressedSize).structEnd();
}

/**
 * encoding_stats: pages by type and encoding, which tells readers (parquet-mr's dictionary filter)
 * whether every data page of the chunk is dictionary-encoded.
 */
function encodingStats(w: ParquetThriftWriter, c: ColumnChunkMeta): void {
  const stats: [number, number, number][] = [];
  if (c.dictionaryPageBytes > 0) stats.push([PAGE_TYPE.DICTIONARY_PAGE, ENCODING.PLAIN, 1]);
  for (const encoding of ['PLAIN', 'RLE_DICTIONARY'] as const) {
    const pages = c.dataPages[encoding];
    if (pages > 0) stats.push([PAGE_TYPE.DATA_PAGE, ENCODING[encoding], pages]);
  }
  w.list(13, TType.STRUCT, stats.length);
  for (const [type, encoding, count] of stats) {
    w.structBegin().i32(1, type).i32(2, encoding).i32(3, count).structEnd();
  }
}

/** Statistics: null_count, max_value, min_value and whether each bound is a value of the chunk. */
function statistics(w: ParquetThriftWriter, s: ChunkStatistics): ParquetThriftWriter {
  w.i64(3, s.nullCount).binary(5, s.max).binary(6, s.min);
  if (s.max !== undefined) w.bool(7, s.maxExact);
  if (s.min !== undefined) w.bool(8, s.minExact);
  return w;
}
