import { ParquetDictionary } from './parquet-dictionary';
import {
  ColumnChunkMeta,
  PhysicalType,
  SchemaElement,
  ValueEncoding,
  dataPageHeader,
  dictionaryPageHeader,
} from './parquet-format';
import { PageCompression, compressPage } from './parquet-page.compressor';
import { ParquetPlainWriter } from './parquet-plain.writer';
import { bitWidth, dictionaryIndices, levels } from './parquet-rle';
import { ParquetStatistics } from './parquet-statistics';
import { ParquetThriftWriter } from './parquet-thrift.writer';
import { PgColumnKind, PgValueKind, flattenArray, parseArray } from './pg-text.decoder';
import { TextRow } from './result.encoder';
import { RowBatch, utf8Text } from './row.batch';

/**
 * Most entries of a chunk's dictionary: its text keys and their Map cost more memory than the
 * entries' bytes (a few MB at this count), so a dictionary of many small values falls back too.
 */
export const DICTIONARY_ENTRIES = 1 << 16;

/** Values of a chunk's first dictionary-encoded page, on which the dictionary is judged. */
const FIRST_PAGE_VALUES = 1 << 13;

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
  /** A chunk whose dictionary passes this many bytes (PLAIN) goes on PLAIN; 0: no dictionary. */
  dictionaryBytes: number;
}

/** A column chunk's pages and what the footer says about them. */
export interface EncodedChunk {
  pages: Buffer[];
  meta: ColumnChunkMeta;
}

/**
 * Encodes one column's text values into Parquet pages (v1 data pages, RLE levels) for the current
 * row group. Values go through the chunk's dictionary, and data pages hold their indices
 * (RLE_DICTIONARY), until the dictionary passes `dictionaryBytes` or the first page shows that it
 * does not pay; from then on values go straight from PostgreSQL's text into PLAIN pages, as
 * parquet-mr and Arrow fall back. Booleans are always PLAIN. A page is closed at a row's end once
 * it holds `pageBytes`, and `finishChunk` hands the row group's pages over, the dictionary first.
 */
export class ParquetColumnWriter {
  private readonly list: boolean;
  private readonly delimiter: string;
  private readonly maxDef: number;
  private readonly element: SchemaElement;
  private readonly type: PhysicalType;
  private readonly path: string[];
  private readonly thrift = new ParquetThriftWriter();
  private readonly stats: ParquetStatistics;

  // current page: levels, and PLAIN values or dictionary indices
  private readonly page: ParquetPlainWriter;
  private defs: Uint8Array = new Uint8Array(1 << 12);
  private reps: Uint8Array | null;
  private levels = 0;
  private indices = new Uint32Array(1 << 12);
  private count = 0;
  // PLAIN bytes of the values indexed in the page: what the dictionary must beat
  private indexedBytes = 0;

  // current chunk
  private readonly dictionary: ParquetDictionary | null;
  private useDictionary: boolean;
  // the dictionary passed a limit: fall back at the row's end
  private dictionaryOverflow = false;
  private readonly dataPages: Record<ValueEncoding, number> = { PLAIN: 0, RLE_DICTIONARY: 0 };
  private pages: Buffer[] = [];
  private pagesBytes = 0;
  private uncompressed = 0;
  private chunkLevels = 0;

  constructor(
    name: string,
    column: PgColumnKind,
    delimiter: string,
    private readonly settings: ColumnWriterSettings,
  ) {
    this.list = column.list;
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
    const value = { kind: column.kind, toJson: column.toJson, stats: this.stats };
    this.page = new ParquetPlainWriter(value);
    this.dictionary =
      column.kind === 'bool' || settings.dictionaryBytes <= 0 ? null : new ParquetDictionary(value);
    this.useDictionary = this.dictionary !== null;
  }

  /** Bytes of the current row group before compression: pages, the dictionary, the open page. */
  get size(): number {
    let open = this.page.length + (this.levels >> 2);
    if (this.dictionary !== null) {
      open += this.dictionary.bytes + ((this.count * bitWidth(this.dictionary.size)) >> 3);
    }
    return this.uncompressed + open;
  }

  /**
   * Appends column `c` of rows [from, to) of `batch`, each value from its bytes (PLAIN pages take
   * text, JSON, integers and booleans as they are); list columns, and a batch that is not
   * well-formed UTF-8, from the batch's text.
   */
  appendBatch(batch: RowBatch, c: number, from: number, to: number): void {
    if (this.list || !batch.utf8) {
      this.append(batch.text(), c, from, to);
      return;
    }
    const { bytes, starts, ends, columns } = batch;
    for (let r = from, k = from * columns + c; r < to; r++, k += columns) {
      const end = ends[k];
      if (this.levels === this.defs.length) this.defs = grow(this.defs, this.levels + 1);
      if (end < 0) {
        this.defs[this.levels++] = 0;
        this.stats.nulls++;
        continue;
      }
      this.defs[this.levels++] = 1;
      // The dictionary is keyed by text.
      if (this.useDictionary) this.put(utf8Text(bytes, starts[k], end));
      else this.page.putBytes(bytes, starts[k], end);
      this.endRow();
    }
  }

  /** Appends column `c` of rows [from, to). */
  append(rows: TextRow[], c: number, from: number, to: number): void {
    if (this.list) {
      for (let r = from; r < to; r++) {
        this.appendList(rows[r][c]);
        this.endRow();
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
      this.endRow();
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

  /** One non-null value: its dictionary index, or its PLAIN bytes. */
  private put(text: string): void {
    if (!this.useDictionary) {
      this.page.put(text);
      return;
    }
    const dictionary = this.dictionary as ParquetDictionary;
    const i = dictionary.indexOf(text);
    if (this.count === this.indices.length) {
      const next = new Uint32Array(this.count * 2);
      next.set(this.indices);
      this.indices = next;
    }
    this.indices[this.count++] = i;
    this.indexedBytes += dictionary.entryBytes(i);
    if (dictionary.bytes > this.settings.dictionaryBytes || dictionary.size > DICTIONARY_ENTRIES) {
      this.dictionaryOverflow = true;
    }
  }

  /** Pages end between rows: a page full, or a dictionary past its limits, is dealt with here. */
  private endRow(): void {
    if (this.dictionaryOverflow) {
      this.dictionaryOverflow = false;
      // the open page keeps the dictionary if it paid for it; the chunk goes on PLAIN
      this.finishPage();
      this.useDictionary = false;
      return;
    }
    if (!this.useDictionary) {
      if (this.page.length >= this.settings.pageBytes) this.finishPage();
      return;
    }
    // indices are held as 4 bytes each until the page closes; the chunk's first page, on which
    // the dictionary is judged, is short, so that a dictionary that does not pay costs little
    const first = this.dataPages.RLE_DICTIONARY === 0;
    if (first ? this.count >= FIRST_PAGE_VALUES : this.count * 4 >= this.settings.pageBytes) {
      this.finishPage();
    }
  }

  /** Whether the dictionary and the page's indices take fewer bytes than its values PLAIN. */
  private dictionaryPays(): boolean {
    const dictionary = this.dictionary as ParquetDictionary;
    const indices = 1 + Math.ceil((this.count * bitWidth(dictionary.size - 1)) / 8);
    return dictionary.bytes + indices < this.indexedBytes;
  }

  /** The open page's indexed values as PLAIN values; the chunk goes on without its dictionary. */
  private indicesToPlain(): void {
    const dictionary = this.dictionary as ParquetDictionary;
    for (let k = 0; k < this.count; k++) dictionary.copyEntry(this.indices[k], this.page);
    dictionary.clear(4 * this.settings.pageBytes);
    this.count = 0;
    this.indexedBytes = 0;
    this.useDictionary = false;
  }

  /** Closes the open page: header, levels and values, compressed if asked. */
  private finishPage(): void {
    if (this.levels === 0) return;
    let encoding: ValueEncoding = 'PLAIN';
    if (this.useDictionary && this.count > 0) {
      // decided on the chunk's first page, as parquet-mr does: later pages keep the dictionary
      if (this.dataPages.RLE_DICTIONARY === 0 && !this.dictionaryPays()) this.indicesToPlain();
      else encoding = 'RLE_DICTIONARY';
    }
    const body: Buffer[] = [];
    if (this.reps) body.push(levels(this.reps, this.levels, 1));
    body.push(levels(this.defs, this.levels, this.maxDef === 3 ? 2 : 1));
    if (encoding === 'PLAIN') {
      body.push(this.page.bytes());
    } else {
      const size = (this.dictionary as ParquetDictionary).size;
      body.push(dictionaryIndices(this.indices, this.count, bitWidth(size - 1)));
    }
    let size = 0;
    for (const b of body) size += b.length;
    // a copy: the working buffers are reused for the next page
    const data = compressPage(Buffer.concat(body, size), this.settings);
    const header = dataPageHeader(this.thrift, {
      numValues: this.levels,
      uncompressedSize: size,
      compressedSize: data.length,
      encoding,
    });
    this.pages.push(header, data);
    this.dataPages[encoding]++;
    this.pagesBytes += header.length + data.length;
    this.uncompressed += header.length + size;
    this.chunkLevels += this.levels;
    this.levels = 0;
    this.count = 0;
    this.indexedBytes = 0;
    this.page.clear(4 * this.settings.pageBytes);
  }

  /** The dictionary page of the chunk, if a data page used the dictionary. */
  private dictionaryPage(): Buffer[] {
    const dictionary = this.dictionary;
    if (dictionary === null || this.dataPages.RLE_DICTIONARY === 0) return [];
    const raw = dictionary.page();
    // a copy: the dictionary's buffer is reused by the next chunk
    const data = compressPage(Buffer.from(raw), this.settings);
    const header = dictionaryPageHeader(this.thrift, {
      numValues: dictionary.size,
      uncompressedSize: raw.length,
      compressedSize: data.length,
    });
    this.uncompressed += header.length + raw.length;
    this.pagesBytes += header.length + data.length;
    return [header, data];
  }

  /**
   * Closes the row group's column chunk, which starts at `offset` in the file, and returns its
   * pages; the writer is then empty (its working buffers are kept for the next row group). A
   * later chunk tries its own dictionary unless this one's did not pay or outgrew its limits.
   */
  finishChunk(offset: number): EncodedChunk {
    this.finishPage();
    const dictionaryPage = this.dictionaryPage();
    const dictionaryPageBytes = dictionaryPage.reduce((n, b) => n + b.length, 0);
    const result: EncodedChunk = {
      pages: dictionaryPage.length === 0 ? this.pages : [...dictionaryPage, ...this.pages],
      meta: {
        type: this.type,
        path: this.path,
        codec: this.settings.codec,
        numValues: this.chunkLevels,
        uncompressedSize: this.uncompressed,
        compressedSize: this.pagesBytes,
        offset,
        dictionaryPageBytes,
        dataPages: { ...this.dataPages },
        statistics: this.stats.take(),
      },
    };
    this.resetChunk();
    return result;
  }

  /** Drops whatever the row group held (a failed result). */
  discard(): void {
    this.levels = 0;
    this.count = 0;
    this.indexedBytes = 0;
    this.page.clear(4 * this.settings.pageBytes);
    this.stats.take();
    this.resetChunk();
  }

  private resetChunk(): void {
    this.pages = [];
    this.pagesBytes = 0;
    this.uncompressed = 0;
    this.chunkLevels = 0;
    this.dataPages.PLAIN = 0;
    this.dataPages.RLE_DICTIONARY = 0;
    this.dictionaryOverflow = false;
    this.dictionary?.clear(4 * this.settings.pageBytes);
  }
}

function grow(levels: Uint8Array, need: number): Uint8Array {
  const next = new Uint8Array(Math.max(need, levels.length * 2));
  next.set(levels);
  return next;
}
