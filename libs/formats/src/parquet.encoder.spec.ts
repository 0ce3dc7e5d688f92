import { duckdb } from '@test/support/duckdb.reader';
import { readBack } from '@test/support/hyparquet.reader';
import { ParquetEncoder, ParquetEncoderSettings } from './parquet.encoder';
import {
  FIXTURE_CASES,
  FIXTURE_COLUMNS,
  OBJECT_JSON_CASES,
  OBJECT_JSON_COLUMNS,
} from './pg-text.fixture';
import { DATE_INFINITY, DATE_MINUS_INFINITY } from './pg-text.decoder';
import { EncoderColumn, TextRow } from './result.encoder';
import { RowBatch } from './row.batch';

const OK = { reason: 'OK', sql_state: '00000', vendor_code: 0 };

function col(name: string, type: string, oid: number): EncoderColumn {
  return { name, type, oid, json: (s) => s };
}

function encode(
  columns: EncoderColumn[],
  chunks: TextRow[][],
  settings: Partial<ParquetEncoderSettings> = {},
): { file: Buffer; parts: Buffer[] } {
  const encoder = new ParquetEncoder({ queryId: 'q-1', layout: 'array', columns }, settings);
  const parts = [encoder.head(), ...chunks.map((c) => encoder.rows(RowBatch.fromText(c)))];
  parts.push(encoder.end(OK) as Buffer);
  return { file: Buffer.concat(parts), parts };
}

const read = (file: Buffer) => readBack(file).rows;
const metadata = (file: Buffer) => readBack(file).meta;

const COLUMNS = FIXTURE_COLUMNS;
const CODECS = ['ZSTD', 'SNAPPY', 'GZIP', 'UNCOMPRESSED'] as const;
const CASES = FIXTURE_CASES;

/** The fixture's form: bytes and uuids as hex. */
function normalise(v: unknown): unknown {
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex');
  if (
    typeof v === 'string' &&
    /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(v)
  ) {
    return v.replace(/-/g, '');
  }
  if (Array.isArray(v)) return v.map(normalise);
  return v === undefined ? null : v;
}

describe(ParquetEncoder.name, () => {
  it.each(CODECS)(
    'writes every common type so that independent readers get each value back (%s pages)',
    async (codec) => {
      const rows = CASES.map(([text]) => text);
      // several chunks, one of them empty
      const { file } = encode(COLUMNS, [rows.slice(0, 1), [], rows.slice(1, 3), rows.slice(3)], {
        codec,
      });
      const got = read(file);
      expect(got).toHaveLength(CASES.length);
      CASES.forEach(([, want], r) => {
        COLUMNS.forEach((c, i) => {
          expect([r, c.name, normalise(got[r][c.name])]).toEqual([r, c.name, want[i]]);
        });
      });
      // DuckDB: the same rows, NULLs where hyparquet has them, the text columns' values
      const duck = await duckdb(file, 'select * from read_parquet(FILE)');
      expect(duck).toHaveLength(CASES.length);
      CASES.forEach(([, want], r) => {
        COLUMNS.forEach((c, i) => {
          expect([r, c.name, duck[r][c.name] === null]).toEqual([r, c.name, want[i] === null]);
        });
        for (const name of ['txt', 'vc', 'num', 'iv']) {
          expect(duck[r][name]).toEqual(want[COLUMNS.findIndex((c) => c.name === name)]);
        }
      });
    },
  );

  it("writes every common type PLAIN from the values' bytes, read back value for value", () => {
    // No dictionary: every value goes from the batch's bytes into a PLAIN page.
    const rows = CASES.map(([text]) => text);
    const { file } = encode(COLUMNS, [rows.slice(0, 2), rows.slice(2)], { dictionaryBytes: 0 });
    const got = read(file);
    expect(got).toHaveLength(CASES.length);
    CASES.forEach(([, want], r) => {
      COLUMNS.forEach((c, i) => {
        expect([r, c.name, normalise(got[r][c.name])]).toEqual([r, c.name, want[i]]);
      });
    });
  });

  it('writes text that is not well-formed UTF-8 (a SQL_ASCII database) as its decoded text', () => {
    // One row, one text value: "a", a lone 0xff byte, "b".
    const bytes = Buffer.from([0x20, 0x61, 0xff, 0x62]);
    const batch = new RowBatch(1, 1, bytes, Int32Array.of(1), Int32Array.of(4));
    for (const dictionaryBytes of [0, 1 << 20]) {
      const encoder = new ParquetEncoder(
        { queryId: 'q-1', layout: 'array', columns: [col('t', 'text', 25)] },
        { dictionaryBytes, codec: 'UNCOMPRESSED' },
      );
      const file = Buffer.concat([encoder.head(), encoder.rows(batch), encoder.end(OK) as Buffer]);
      expect(read(file)).toEqual([{ t: 'a\ufffdb' }]);
      // the page holds the text's UTF-8, not the bytes PostgreSQL sent
      expect(file.includes(Buffer.from('a\ufffdb'))).toBe(true);
      expect(file.includes(bytes.subarray(1))).toBe(false);
    }
  });

  it.each(CODECS)('writes an empty result that both readers read (%s pages)', async (codec) => {
    const { file } = encode(COLUMNS, [[]], { codec });
    expect(read(file)).toEqual([]);
    expect(await duckdb(file, 'select count(*) as n from read_parquet(FILE)')).toEqual([
      { n: '0' },
    ]);
  });

  it('declares the logical type of each column, all nullable', () => {
    const { file } = encode(COLUMNS, [[]]);
    const meta = metadata(file);
    const byName = new Map(meta.schema.map((e) => [e.name, e]));
    const logical = (name: string) => {
      const e = byName.get(name);
      return [e?.type, e?.type_length, e?.logical_type, e?.repetition_type].map(
        (v) => v ?? undefined,
      );
    };
    expect(logical('i2')).toEqual([
      'INT32',
      undefined,
      { type: 'INTEGER', bitWidth: 16, isSigned: true },
      'OPTIONAL',
    ]);
    expect(byName.get('i2')?.converted_type).toBe('INT_16');
    expect(logical('i4').slice(0, 1)).toEqual(['INT32']);
    expect(logical('i8').slice(0, 1)).toEqual(['INT64']);
    expect(logical('num')).toEqual(['BYTE_ARRAY', undefined, { type: 'STRING' }, 'OPTIONAL']);
    expect(logical('f4').slice(0, 1)).toEqual(['FLOAT']);
    expect(logical('f8').slice(0, 1)).toEqual(['DOUBLE']);
    expect(logical('b').slice(0, 1)).toEqual(['BOOLEAN']);
    expect(logical('d')).toEqual(['INT32', undefined, { type: 'DATE' }, 'OPTIONAL']);
    expect(logical('tm')).toEqual([
      'INT64',
      undefined,
      { type: 'TIME', isAdjustedToUTC: false, unit: 'MICROS' },
      'OPTIONAL',
    ]);
    expect(logical('ts')).toEqual([
      'INT64',
      undefined,
      { type: 'TIMESTAMP', isAdjustedToUTC: false, unit: 'MICROS' },
      'OPTIONAL',
    ]);
    expect(logical('tstz')).toEqual([
      'INT64',
      undefined,
      { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MICROS' },
      'OPTIONAL',
    ]);
    expect(logical('u')).toEqual(['FIXED_LEN_BYTE_ARRAY', 16, { type: 'UUID' }, 'OPTIONAL']);
    expect(logical('j')).toEqual(['BYTE_ARRAY', undefined, { type: 'JSON' }, 'OPTIONAL']);
    expect(logical('jb')).toEqual(['BYTE_ARRAY', undefined, { type: 'JSON' }, 'OPTIONAL']);
    expect(logical('by')).toEqual(['BYTE_ARRAY', undefined, undefined, 'OPTIONAL']);
    expect(logical('ia')).toEqual([undefined, undefined, { type: 'LIST' }, 'OPTIONAL']);
    expect(logical('iv')).toEqual(['BYTE_ARRAY', undefined, { type: 'STRING' }, 'OPTIONAL']);
    const kv = new Map(meta.key_value_metadata?.map((e) => [e.key, e.value]));
    expect(kv.get('sluice.query_id')).toBe('q-1');
    expect(JSON.parse(kv.get('sluice.schema') as string)[2]).toEqual({
      name: 'i8',
      type: 'bigint',
    });
  });

  it('carries composites, hstore and arrays of them as JSON: their to_json() text', () => {
    const { file } = encode(OBJECT_JSON_COLUMNS, [OBJECT_JSON_CASES.map(([text]) => text)]);
    const got = readBack(file);
    expect(got.rows.map((row) => OBJECT_JSON_COLUMNS.map((c) => row[c.name]))).toEqual(
      OBJECT_JSON_CASES.map(([, want]) => want),
    );
    const byName = new Map(got.meta.schema.map((e) => [e.name, e]));
    expect(byName.get('p')?.logical_type).toEqual({ type: 'JSON' });
    expect(byName.get('h')?.logical_type).toEqual({ type: 'JSON' });
    expect(byName.get('ps')?.logical_type).toEqual({ type: 'LIST' });
    expect(byName.get('element')?.logical_type).toEqual({ type: 'JSON' });
  });

  it('writes a row group when one is full and nothing in between, and forgets it', () => {
    const columns = [col('id', 'bigint', 20), col('name', 'text', 25), col('sparse', 'date', 1082)];
    const chunk = (from: number) =>
      Array.from({ length: 100 }, (_, k): TextRow => [
        String(from + k),
        k % 7 ? `n${from + k}` : null,
        (from + k) % 100 === 99 ? '2024-01-01' : null,
      ]);
    const { file, parts } = encode(
      columns,
      Array.from({ length: 10 }, (_, k) => chunk(k * 100)),
      { rowGroupRows: 250 },
    );
    // head, 10 chunks, end: a row group comes out at chunks 3, 5, 8 and 10
    expect(parts.slice(1, 11).map((p) => p.length > 0)).toEqual([
      false,
      false,
      true,
      false,
      true,
      false,
      false,
      true,
      false,
      true,
    ]);
    const meta = metadata(file);
    expect(meta.row_groups.map((g) => Number(g.num_rows))).toEqual([250, 250, 250, 250]);
    expect(meta.row_groups[0].columns[0].meta_data?.statistics).toMatchObject({
      null_count: 0n,
      min_value: 0n,
      max_value: 249n,
    });
    const got = read(file);
    expect(got.map((r) => r.id)).toEqual(Array.from({ length: 1000 }, (_, i) => BigInt(i)));
    expect(got.map((r) => r.name)).toEqual(
      Array.from({ length: 1000 }, (_, i) => ((i % 100) % 7 ? `n${i}` : null)),
    );
    expect(got.map((r) => r.sparse)).toEqual(
      Array.from({ length: 1000 }, (_, i) => (i % 100 === 99 ? 19723 : null)),
    );
  });

  it('flushes by size, splits pages, and bounds what it holds', () => {
    const columns = [col('t', 'text', 25), col('a', 'text[]', 1009)];
    const big = 'x'.repeat(1000);
    // distinct values: a dictionary would not pay, so pages and row groups hold them PLAIN
    const rows = Array.from({ length: 3000 }, (_, i): TextRow => [
      `${i}${big}`,
      `{${i},"${big}${i}"}`,
    ]);
    const { file } = encode(columns, [rows.slice(0, 1500), rows.slice(1500)], {
      rowGroupBytes: 1 << 20,
      pageBytes: 64 << 10,
    });
    // ~6 MB in all, in row groups of about 1 MB, each column chunk in pages of about 64 kB
    const meta = metadata(file);
    expect(meta.row_groups.length).toBeGreaterThanOrEqual(5);
    for (const group of meta.row_groups) {
      expect(Number(group.total_byte_size)).toBeLessThan(1.1 * (1 << 20));
    }
    const pages = metadata(file).row_groups[0].columns[0];
    const chunkBytes = Number(pages.meta_data?.total_uncompressed_size);
    expect(chunkBytes).toBeGreaterThan(6 * (64 << 10));
    const got = read(file);
    expect(got).toHaveLength(3000);
    expect(got[2999]).toEqual({ t: `2999${big}`, a: ['2999', `${big}2999`] });
  });

  it.each([
    ['dictionary-encoded', 1 << 20],
    ['PLAIN', 0],
  ])(
    'round-trips random NULL patterns and list shapes across page and row group ends (%s)',
    (_, dictionaryBytes) => {
      let seed = 42;
      const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
      const columns = [col('b', 'boolean', 16), col('ia', 'integer[]', 1007), col('t', 'text', 25)];
      const want: unknown[][] = [];
      const rows: TextRow[] = [];
      for (let i = 0; i < 5000; i++) {
        // runs of NULLs and of values, of random lengths
        const nulls = Math.floor(i / (1 + Math.floor(random() * 20))) % 2 === 0;
        const list =
          random() < 0.1
            ? null
            : Array.from({ length: Math.floor(random() * 12) }, (_, k) =>
                random() < 0.3 ? null : i * k,
              );
        const t = nulls ? null : 'x'.repeat(Math.floor(random() * 300));
        rows.push([
          nulls ? null : i % 3 ? 't' : 'f',
          list && `{${list.map((v) => v ?? 'NULL').join(',')}}`,
          t,
        ]);
        want.push([nulls ? null : i % 3 !== 0, list, t]);
      }
      const { file } = encode(columns, [rows.slice(0, 2222), rows.slice(2222)], {
        pageBytes: 4096,
        rowGroupBytes: 200_000,
        rowGroupRows: 1500,
        dictionaryBytes,
      });
      const groups = metadata(file).row_groups;
      expect(groups.length).toBeGreaterThanOrEqual(4);
      expect(groups[0].columns[2].meta_data?.encodings.includes('RLE_DICTIONARY')).toBe(
        dictionaryBytes > 0,
      );
      expect(read(file).map((r) => [r.b, r.ia, r.t])).toEqual(want);
    },
  );

  it('gives the memory of a huge value back after its page', () => {
    const huge = 'é'.repeat(3 << 20);
    const { file } = encode([col('t', 'text', 25)], [[[huge], ['small']]], { pageBytes: 1 << 16 });
    expect(read(file).map((r) => (r.t as string).length)).toEqual([huge.length, 5]);
  });

  it('compresses pages with ZSTD by default', () => {
    const rows = Array.from({ length: 500 }, (_, i): TextRow => [
      String(i),
      'same text '.repeat(5),
    ]);
    const { file } = encode([col('i', 'integer', 23), col('t', 'text', 25)], [rows]);
    expect(metadata(file).row_groups[0].columns.map((c) => c.meta_data?.codec)).toEqual([
      'ZSTD',
      'ZSTD',
    ]);
  });

  it.each(['ZSTD', 'SNAPPY', 'GZIP'] as const)('compresses pages with %s when asked', (codec) => {
    const rows = Array.from({ length: 500 }, (_, i): TextRow => [
      String(i),
      i % 7 === 0 ? null : `same text ${i % 3} `.repeat(5),
    ]);
    const columns = [col('i', 'integer', 23), col('t', 'text', 25)];
    // PLAIN pages: what the codec makes of the values themselves
    const plain = encode(columns, [rows], { codec: 'UNCOMPRESSED', dictionaryBytes: 0 }).file;
    const compressed = encode(columns, [rows], { codec, dictionaryBytes: 0 }).file;
    expect(compressed.length).toBeLessThan(plain.length / 3);
    expect(metadata(compressed).row_groups[0].columns[1].meta_data?.codec).toBe(codec);
    expect(metadata(plain).row_groups[0].columns[1].meta_data?.codec).toBe('UNCOMPRESSED');
    expect(read(compressed)).toEqual(read(plain));
  });

  it('writes a valid file for an empty result', () => {
    const { file } = encode([col('a', 'integer', 23)], [[], []]);
    const { meta, rows } = readBack(file);
    expect(meta.row_groups).toEqual([]);
    expect(meta.num_rows).toBe(0n);
    expect(rows).toEqual([]);
  });

  it('writes a valid file for a statement without columns', () => {
    const { file } = encode([], [[], [[], []]]);
    expect(file.subarray(0, 4).toString()).toBe('PAR1');
    expect(file.subarray(-4).toString()).toBe('PAR1');
    const meta = metadata(file);
    expect(meta.schema).toHaveLength(1);
    expect(Number(meta.num_rows)).toBe(2);
    expect(read(encode([], []).file)).toEqual([]);
  });

  it('gives repeated column names a suffix', () => {
    const columns = [col('a', 'integer', 23), col('a', 'integer', 23), col('a_2', 'text', 25)];
    const got = read(encode(columns, [[['1', '2', 'x']]]).file);
    expect(got).toEqual([{ a: 1, a_3: 2, a_2: 'x' }]);
  });

  const INT64_MAX = 2n ** 63n - 1n;
  const TIMES = [
    col('ts', 'timestamp without time zone', 1114),
    col('tstz', 'timestamp with time zone', 1184),
    col('d', 'date', 1082),
  ];

  /** What encoding one row of TIMES throws. */
  function thrownBy(row: (string | null)[]): unknown {
    const encoder = new ParquetEncoder({ queryId: 'q', layout: 'array', columns: TIMES });
    try {
      encoder.head();
      encoder.rows(RowBatch.fromText([row]));
      encoder.end(OK);
    } catch (err) {
      return err;
    }
    return undefined;
  }

  it('writes every timestamp an int64 holds, BC and infinite ones, and refuses later ones with 22008', () => {
    const rows: TextRow[] = [
      ['4714-11-24 00:00:00 BC', '4714-11-24 00:00:00+00 BC', '4714-11-24 BC'],
      ['0044-03-15 12:00:00.5 BC', '0044-03-15 12:00:00.5+00 BC', '0044-03-15 BC'],
      // The last microsecond an int64 holds (2^63 − 1 itself stands for infinity).
      ['294247-01-10 04:00:54.775806', '294247-01-10 04:00:54.775806+00', '5874897-12-31'],
      ['infinity', 'infinity', 'infinity'],
      ['-infinity', '-infinity', '-infinity'],
    ];
    const { file } = encode(TIMES, [rows]);
    // µs and days since 1970 as PostgreSQL's extract(epoch …) and date subtraction give them.
    expect(read(file)).toEqual([
      { ts: -210866803200000000n, tstz: -210866803200000000n, d: -2440588 },
      { ts: -63517780799500000n, tstz: -63517780799500000n, d: -735160 },
      { ts: INT64_MAX - 1n, tstz: INT64_MAX - 1n, d: 2145042905 },
      { ts: INT64_MAX, tstz: INT64_MAX, d: DATE_INFINITY },
      { ts: -INT64_MAX, tstz: -INT64_MAX, d: DATE_MINUS_INFINITY },
    ]);
    // Past 294247 (PostgreSQL goes on to 294276): an error the client is told, not a wrong value.
    for (const row of [
      ['294276-12-31 23:59:59', null, null],
      ['294247-01-10 04:00:54.775807', null, null],
      [null, '294276-12-31 23:59:59.999999+00', null],
    ]) {
      expect(thrownBy(row)).toMatchObject({
        code: 'DATA_ERROR',
        sqlState: '22008',
        message: expect.stringContaining(`timestamp ${row[0] ?? row[1]} is out of range`),
      });
    }
  });

  it('returns null at the end of a failed result (the response is aborted)', () => {
    const encoder = new ParquetEncoder({ queryId: 'q', layout: 'array', columns: COLUMNS });
    encoder.head();
    encoder.rows(RowBatch.fromText([CASES[0][0]]));
    expect(encoder.end({ reason: 'boom', sql_state: 'XX000', vendor_code: -103 })).toBeNull();
  });
});
