import { DuckRow, duckdb, duckdbMetadata } from '@test/support/duckdb.reader';
import { readBack } from '@test/support/hyparquet.reader';
import { DICTIONARY_ENTRIES } from './parquet-column.writer';
import { ParquetDictionary } from './parquet-dictionary';
import { ParquetEncoder, ParquetEncoderSettings } from './parquet.encoder';
import { FIXTURE_CASES, FIXTURE_COLUMNS } from './pg-text.fixture';
import { EncoderColumn, TextRow } from './result.encoder';
import { RowBatch } from './row.batch';

const OK = { reason: 'OK', sql_state: '00000', vendor_code: 0 };
const CODECS = ['ZSTD', 'SNAPPY', 'GZIP', 'UNCOMPRESSED'] as const;

function col(name: string, type: string, oid: number): EncoderColumn {
  return { name, type, oid, json: (s) => s };
}

function encode(
  columns: EncoderColumn[],
  rows: TextRow[],
  settings: Partial<ParquetEncoderSettings> = {},
): Buffer {
  const encoder = new ParquetEncoder({ queryId: 'q-1', layout: 'array', columns }, settings);
  // fetch-sized chunks, as the worker hands them over
  const parts = [encoder.head()];
  for (let i = 0; i < rows.length; i += 1000)
    parts.push(encoder.rows(RowBatch.fromText(rows.slice(i, i + 1000))));
  parts.push(encoder.end(OK) as Buffer);
  return Buffer.concat(parts);
}

/** DuckDB's parquet_metadata() of each column chunk: where its dictionary is, how it is encoded. */
async function chunks(file: Buffer): Promise<DuckRow[]> {
  return (await duckdbMetadata(file)).map((c) => ({
    row_group_id: c.row_group_id,
    path: c.path_in_schema,
    encodings: c.encodings,
    dictionary: c.dictionary_page_offset !== null,
  }));
}

const STATS = 'stats_min, stats_max, stats_null_count, stats_min_value, stats_max_value';

describe(ParquetDictionary.name, () => {
  it.each(CODECS)(
    'writes every type but boolean dictionary-encoded, read back value for value (%s pages)',
    async (codec) => {
      // each case 20 times: cycling through them (bit-packed indices), then each in a run (RLE)
      const rows: TextRow[] = [];
      for (let k = 0; k < 10; k++) for (const [row] of FIXTURE_CASES) rows.push(row);
      for (const [row] of FIXTURE_CASES) for (let k = 0; k < 10; k++) rows.push(row);
      const file = encode(FIXTURE_COLUMNS, rows, { codec });
      // PLAIN pages are read back value for value against the fixture in parquet.encoder.spec
      const plain = encode(FIXTURE_COLUMNS, rows, { codec, dictionaryBytes: 0 });

      const got = readBack(file);
      expect(got.rows).toHaveLength(rows.length);
      expect(got.rows).toEqual(readBack(plain).rows);
      const sql = 'select * from read_parquet(FILE)';
      expect(await duckdb(file, sql)).toEqual(await duckdb(plain, sql));

      const meta = await chunks(file);
      expect(meta).toHaveLength(FIXTURE_COLUMNS.length);
      for (const c of meta) {
        const bool = c.path === 'b';
        expect([c.path, c.dictionary, c.encodings]).toEqual([
          c.path,
          !bool,
          bool ? 'PLAIN, RLE' : 'PLAIN, RLE, RLE_DICTIONARY',
        ]);
      }
      // statistics are of the values, whatever the pages hold
      const stats = `select path_in_schema, ${STATS} from parquet_metadata(FILE) order by column_id`;
      expect(await duckdb(file, stats)).toEqual(await duckdb(plain, stats));
      const encodingStats = got.meta.row_groups[0].columns[0].meta_data?.encoding_stats;
      expect(encodingStats).toEqual([
        { page_type: 'DICTIONARY_PAGE', encoding: 'PLAIN', count: 1 },
        { page_type: 'DATA_PAGE', encoding: 'RLE_DICTIONARY', count: 1 },
      ]);
    },
  );

  it('writes values that are all distinct PLAIN, with no dictionary page', async () => {
    const big = 'x'.repeat(500);
    const rows = Array.from({ length: 3000 }, (_, i): TextRow => [String(i), `${i}${big}`]);
    const columns = [col('i', 'integer', 23), col('t', 'text', 25)];
    const file = encode(columns, rows);
    expect(await chunks(file)).toEqual([
      { row_group_id: '0', path: 'i', encodings: 'PLAIN, RLE', dictionary: false },
      { row_group_id: '0', path: 't', encodings: 'PLAIN, RLE', dictionary: false },
    ]);
    const got = readBack(file).rows;
    expect(got.map((r) => [String(r.i), r.t])).toEqual(rows);
  });

  it('falls back to PLAIN once the dictionary passes its limit, keeping the pages written with it', async () => {
    // 2,000 rows of 5 values, then 2,000 distinct ones of 100 bytes (200 kB) in each row group
    const group = (g: number) =>
      Array.from({ length: 4000 }, (_, i): TextRow => [
        i < 2000 ? `tag ${i % 5}` : `${g}-${i}-${'y'.repeat(100)}`,
      ]);
    const rows = [...group(0), ...group(1)];
    const settings = { pageBytes: 4096, dictionaryBytes: 64 << 10, rowGroupRows: 4000 };
    const file = encode([col('t', 'text', 25)], rows, settings);
    expect(await chunks(file)).toEqual([
      { row_group_id: '0', path: 't', encodings: 'PLAIN, RLE, RLE_DICTIONARY', dictionary: true },
      // a column whose dictionary failed once goes on PLAIN
      { row_group_id: '1', path: 't', encodings: 'PLAIN, RLE', dictionary: false },
    ]);
    const got = readBack(file);
    const pages = got.meta.row_groups[0].columns[0].meta_data?.encoding_stats ?? [];
    expect(pages.map((p) => [p.page_type, p.encoding])).toEqual([
      ['DICTIONARY_PAGE', 'PLAIN'],
      ['DATA_PAGE', 'PLAIN'],
      ['DATA_PAGE', 'RLE_DICTIONARY'],
    ]);
    expect(got.rows.map((r) => r.t)).toEqual(rows.map(([t]) => t));
    const duck = await duckdb(file, 'select t from read_parquet(FILE)');
    expect(duck.map((r) => r.t)).toEqual(rows.map(([t]) => t));
    // the dictionary page holds what was written before the limit, not every distinct value
    const dictionaryPage = await duckdb(
      file,
      'select data_page_offset - dictionary_page_offset as n from parquet_metadata(FILE) where row_group_id = 0',
    );
    expect(Number(dictionaryPage[0].n)).toBeLessThan((64 << 10) + 1024);
  });

  it('falls back to PLAIN past the most entries a dictionary holds', () => {
    // small values each twice: the dictionary pays, and stays under its bytes' limit
    const distinct = DICTIONARY_ENTRIES + 5000;
    const rows = Array.from({ length: 2 * distinct }, (_, i): TextRow => [
      `v${String(i >> 1).padStart(9, '0')}`,
    ]);
    const file = encode([col('t', 'text', 25)], rows, { pageBytes: 64 << 10 });
    const got = readBack(file);
    expect(got.meta.row_groups).toHaveLength(1);
    const pages = got.meta.row_groups[0].columns[0].meta_data?.encoding_stats ?? [];
    expect(pages.map((p) => p.encoding)).toEqual(['PLAIN', 'PLAIN', 'RLE_DICTIONARY']);
    expect(got.rows.map((r) => r.t)).toEqual(rows.map(([t]) => t));
  });

  it('dictionary-encodes a mostly-NULL column and a jsonb of few values', async () => {
    const rows = Array.from({ length: 5000 }, (_, i): TextRow => [
      i % 20 === 0 ? `note ${i % 7}` : null,
      `{"n": ${i % 50}, "ok": ${i % 3 === 0}}`,
    ]);
    const columns = [col('sparse', 'text', 25), col('doc', 'jsonb', 3802)];
    const file = encode(columns, rows);
    const meta = await chunks(file);
    expect(meta.map((c) => [c.path, c.encodings, c.dictionary])).toEqual([
      ['sparse', 'PLAIN, RLE, RLE_DICTIONARY', true],
      ['doc', 'PLAIN, RLE, RLE_DICTIONARY', true],
    ]);
    const got = readBack(file);
    expect(got.rows.map((r) => [r.sparse, r.doc])).toEqual(rows);
    expect(got.meta.row_groups[0].columns[0].meta_data?.statistics).toMatchObject({
      null_count: 4750n,
      min_value: 'note 0',
      max_value: 'note 6',
    });
    const duck = await duckdb(file, 'select sparse, doc::varchar as doc from read_parquet(FILE)');
    expect(duck.map((r) => [r.sparse, r.doc])).toEqual(rows);
    // the dictionary and the indices take less than the values PLAIN (before compression)
    const codec = 'UNCOMPRESSED';
    expect(encode(columns, rows, { codec }).length).toBeLessThan(
      encode(columns, rows, { codec, dictionaryBytes: 0 }).length / 2,
    );
  });

  it('writes an all-NULL chunk without a dictionary, and one value with indices of bit width 0', async () => {
    const rows = Array.from({ length: 100 }, (_, i): TextRow => [null, i % 9 ? 'same' : null]);
    const file = encode([col('t', 'text', 25), col('one', 'text', 25)], rows);
    expect(await chunks(file)).toEqual([
      { row_group_id: '0', path: 't', encodings: 'PLAIN, RLE', dictionary: false },
      { row_group_id: '0', path: 'one', encodings: 'PLAIN, RLE, RLE_DICTIONARY', dictionary: true },
    ]);
    const want = rows.map(([t, one]) => ({ t, one }));
    expect(readBack(file).rows).toEqual(want);
    expect(await duckdb(file, 'select t, one from read_parquet(FILE)')).toEqual(want);
  });
});
