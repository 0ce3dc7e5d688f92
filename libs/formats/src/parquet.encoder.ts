import { ParquetCompression, Status, isFailure } from '@app/contracts';
import { ParquetColumnWriter, parquetSchema } from './parquet-column.writer';
import { Codec, RowGroupMeta, SchemaElement, fileMetaData } from './parquet-format';
import { ParquetThriftWriter } from './parquet-thrift.writer';
import { pgArrayDelimiter, pgColumnKind } from './pg-text.decoder';
import { EncoderOptions, ResultEncoder, eachChunk } from './result.encoder';
import { RowBatch } from './row.batch';

export interface ParquetEncoderSettings {
  /** A row group is written out once its pages hold this many bytes (before compression). */
  rowGroupBytes: number;
  /** …or this many rows, whichever comes first. */
  rowGroupRows: number;
  /** Target size of a data page. */
  pageBytes: number;
  /** Page compression: ZSTD by default, as users' own tools write it. */
  codec: Codec;
  /** zlib level for GZIP pages. */
  gzipLevel: number;
  /** zstd level for ZSTD pages (zstd's own default: bench/PARQUET.md). */
  zstdLevel: number;
  /**
   * A column chunk's dictionary past this many bytes falls back to PLAIN pages (parquet-mr's and
   * Arrow's limit); 0 writes no dictionary.
   */
  dictionaryBytes: number;
}

/**
 * 8 MB row groups and 256 KB pages: each column holds its open page, in a buffer that doubles
 * past the page's size, so the page size bounds what a row group's encoding holds beside its
 * compressed pages (bench/PARQUET.md).
 */
export const PARQUET_ENCODER_DEFAULTS: Readonly<ParquetEncoderSettings> = {
  rowGroupBytes: 8 << 20,
  rowGroupRows: 1_000_000,
  pageBytes: 256 << 10,
  codec: 'ZSTD',
  gzipLevel: 1,
  zstdLevel: 3,
  dictionaryBytes: 1 << 20,
};

/** The `compression` parameter of `application/parquet` → the codec of the file's pages. */
export const PARQUET_CODECS: Readonly<Record<ParquetCompression, Codec>> = {
  zstd: 'ZSTD',
  snappy: 'SNAPPY',
  gzip: 'GZIP',
  none: 'UNCOMPRESSED',
};

const MAGIC = 'PAR1';
// Most rows appended between two checks of the row group's size.
const MAX_SLICE_ROWS = 4096;
const EMPTY = Buffer.alloc(0);

/**
 * application/parquet: one file, written as it goes — `head` is the magic, `rows` returns a row
 * group whenever one is full (else nothing), `end` the last row group and the footer. Only the
 * open row group is held in memory. A failure cannot be told in the file: `end()` of a failure (isFailure) is null.
 */
export class ParquetEncoder implements ResultEncoder {
  private readonly settings: ParquetEncoderSettings;
  private readonly writers: ParquetColumnWriter[];
  private readonly schema: SchemaElement[];
  private readonly rowGroups: RowGroupMeta[] = [];
  // bytes of the file so far: the magic, then the row groups
  private offset = MAGIC.length;
  private groupRows = 0;
  private totalRows = 0;
  // Estimate that sizes the first slice small.
  private bytesPerRow = 64 << 10;

  constructor(
    private readonly options: EncoderOptions,
    settings: Partial<ParquetEncoderSettings> = {},
  ) {
    this.settings = { ...PARQUET_ENCODER_DEFAULTS, ...settings };
    const names = uniqueNames(options.columns.map((c) => c.name));
    const { pageBytes, codec, gzipLevel, zstdLevel, dictionaryBytes } = this.settings;
    const writerSettings = { pageBytes, codec, gzipLevel, zstdLevel, dictionaryBytes };
    const kinds = options.columns.map((c) => pgColumnKind(c.oid, c.type, c.objectJson));
    this.writers = options.columns.map(
      (c, i) =>
        new ParquetColumnWriter(names[i], kinds[i], pgArrayDelimiter(c.oid), writerSettings),
    );
    this.schema = [
      { name: 'schema', numChildren: options.columns.length },
      ...kinds.flatMap((kind, i) => parquetSchema(names[i], kind)),
    ];
  }

  head(): Buffer {
    return Buffer.from(MAGIC);
  }

  rows(batch: RowBatch, chunkRows = batch.length): Buffer {
    return eachChunk(batch, Math.max(1, chunkRows), (chunk) => this.chunk(chunk));
  }

  private chunk(batch: RowBatch): Buffer {
    const out: Buffer[] = [];
    const { rowGroupBytes, rowGroupRows } = this.settings;
    const length = batch.length;
    for (let from = 0; from < length;) {
      // Slices sized from the bytes per row so far, so that a row group overshoots by little.
      const before = this.groupBytes();
      const fit = Math.ceil((rowGroupBytes - before) / this.bytesPerRow);
      const slice = Math.max(1, Math.min(MAX_SLICE_ROWS, fit, rowGroupRows - this.groupRows));
      const to = Math.min(length, from + slice);
      for (let c = 0; c < this.writers.length; c++) this.writers[c].appendBatch(batch, c, from, to);
      this.groupRows += to - from;
      const after = this.groupBytes();
      this.bytesPerRow = Math.max(1, (after - before) / (to - from));
      from = to;
      if (this.groupRows >= rowGroupRows || after >= rowGroupBytes) out.push(this.flush());
    }
    return out.length === 0 ? EMPTY : out.length === 1 ? out[0] : Buffer.concat(out);
  }

  end(status: Status): Buffer | null {
    if (isFailure(status)) {
      for (const w of this.writers) w.discard();
      return null;
    }
    const last = this.groupRows > 0 ? this.flush() : EMPTY;
    const footer = fileMetaData(new ParquetThriftWriter(), {
      schema: this.schema,
      numRows: this.totalRows,
      rowGroups: this.rowGroups,
      keyValue: [
        ['sluice.query_id', this.options.queryId],
        [
          'sluice.schema',
          JSON.stringify(this.options.columns.map(({ name, type }) => ({ name, type }))),
        ],
      ],
      createdBy: 'sluice',
    });
    const length = Buffer.allocUnsafe(4);
    length.writeUInt32LE(footer.length);
    return Buffer.concat([last, footer, length, Buffer.from(MAGIC)]);
  }

  private groupBytes(): number {
    let n = 0;
    for (const w of this.writers) n += w.size;
    return n;
  }

  /** Writes out the open row group and forgets its pages. */
  private flush(): Buffer {
    const start = this.offset;
    const pages: Buffer[] = [];
    const columns = [];
    let uncompressed = 0;
    for (const w of this.writers) {
      const { pages: chunk, meta } = w.finishChunk(this.offset);
      for (const p of chunk) pages.push(p);
      columns.push(meta);
      this.offset += meta.compressedSize;
      uncompressed += meta.uncompressedSize;
    }
    this.rowGroups.push({
      columns,
      numRows: this.groupRows,
      totalByteSize: uncompressed,
      offset: start,
      compressedSize: this.offset - start,
    });
    this.totalRows += this.groupRows;
    this.groupRows = 0;
    return Buffer.concat(pages, this.offset - start);
  }
}

/** Parquet readers look columns up by name: a repeated name gets a suffix (`a`, `a_2`). */
function uniqueNames(names: string[]): string[] {
  const taken = new Set(names);
  const seen = new Set<string>();
  return names.map((name) => {
    if (!seen.has(name)) {
      seen.add(name);
      return name;
    }
    let k = 2;
    while (taken.has(`${name}_${k}`)) k++;
    const unique = `${name}_${k}`;
    taken.add(unique);
    seen.add(unique);
    return unique;
  });
}
