import { duckdb, duckdbMetadata } from '@test/support/duckdb.reader';
import { ParquetEncoder } from './parquet.encoder';
import { ParquetStatistics, STATISTICS_BYTES } from './parquet-statistics';
import { EncoderColumn, TextRow } from './result.encoder';
import { RowBatch } from './row.batch';

const OK = { reason: 'OK', sql_state: '00000', vendor_code: 0 };

function col(name: string, type: string, oid: number): EncoderColumn {
  return { name, type, oid, json: (s) => s };
}

function encode(columns: EncoderColumn[], rows: TextRow[], rowGroupRows = 1_000_000): Buffer {
  const encoder = new ParquetEncoder(
    { queryId: 'q-1', layout: 'array', columns },
    { rowGroupRows },
  );
  return Buffer.concat([
    encoder.head(),
    encoder.rows(RowBatch.fromText(rows)),
    encoder.end(OK) as Buffer,
  ]);
}

const LONG_A = 'a'.repeat(STATISTICS_BYTES + 10);
const LONG_Z = `z${'é'.repeat(STATISTICS_BYTES)}`;

// Each column holds values whose order differs between the spec's order and a naive one: negative
// integers (unsigned order would call them largest), -0 and NaN, 'é' (above ASCII as unsigned bytes,
// below it as signed ones), numeric text, timestamps before 1970, NULLs.
const COLUMNS = [
  col('i2', 'smallint', 21),
  col('i4', 'integer', 23),
  col('i8', 'bigint', 20),
  col('num', 'numeric', 1700),
  col('f4', 'real', 700),
  col('f8', 'double precision', 701),
  col('txt', 'text', 25),
  col('b', 'boolean', 16),
  col('d', 'date', 1082),
  col('tm', 'time without time zone', 1083),
  col('ts', 'timestamp without time zone', 1114),
  col('tstz', 'timestamp with time zone', 1184),
  col('u', 'uuid', 2950),
  col('jb', 'jsonb', 3802),
  col('by', 'bytea', 17),
  col('ia', 'integer[]', 1007),
  col('empty', 'text', 25),
];
const ROWS: TextRow[] = [
  [
    '-5',
    '-70000',
    '-9000000000',
    '10.5',
    '-0',
    '-0',
    'b',
    'f',
    '1969-12-31',
    '00:00:01',
    '1960-01-01 00:00:00',
    '1960-01-01 00:00:00+00',
    'ffffffff-0000-0000-0000-000000000000',
    '{"b": 1}',
    '\\xff00',
    '{-3,NULL,7}',
    null,
  ],
  [
    '3',
    '2',
    '5',
    '9.25',
    '0',
    'NaN',
    'é',
    't',
    '2024-02-29',
    '23:59:59.999999',
    '2030-06-01 12:00:00',
    '2030-06-01 12:00:00+00',
    '00000000-0000-0000-0000-000000000001',
    '{"a": 2}',
    '\\x00ff',
    '{}',
    null,
  ],
  [
    null,
    null,
    null,
    null,
    null,
    null,
    'a',
    null,
    null,
    null,
    null,
    null,
    null,
    null,
    null,
    null,
    null,
  ],
  [
    '7',
    '9',
    '-1',
    '-2',
    '1.5',
    '-1e300',
    'Z',
    't',
    '2000-01-01',
    '12:00:00',
    '2000-01-01 00:00:00',
    '2000-01-01 00:00:00+00',
    '12345678-1234-1234-1234-123456789abc',
    '[1, 2]',
    '\\x',
    null,
    null,
  ],
];

type Stats = { min: unknown; max: unknown; nulls: unknown; minExact: unknown; maxExact: unknown };

async function statsOf(file: Buffer): Promise<Record<string, Stats>> {
  const meta = await duckdbMetadata(file);
  return Object.fromEntries(
    meta.map((m) => [
      m.path_in_schema as string,
      {
        min: m.stats_min_value,
        max: m.stats_max_value,
        nulls: m.stats_null_count,
        minExact: m.min_is_exact,
        maxExact: m.max_is_exact,
      },
    ]),
  );
}

describe(ParquetStatistics.name, () => {
  it('writes min, max and null count of every column chunk in the order of its type, as DuckDB reads them', async () => {
    const stats = await statsOf(encode(COLUMNS, ROWS));
    const exact = { minExact: true, maxExact: true };
    expect(stats).toEqual({
      i2: { min: '-5', max: '7', nulls: '1', ...exact },
      i4: { min: '-70000', max: '9', nulls: '1', ...exact },
      i8: { min: '-9000000000', max: '5', nulls: '1', ...exact },
      // numeric is text: its order is the string's
      num: { min: '-2', max: '9.25', nulls: '1', ...exact },
      // -0 and +0 both bound a zero; NaN is left out
      f4: { min: '-0.0', max: '1.5', nulls: '1', ...exact },
      f8: { min: '-1e+300', max: '0.0', nulls: '1', ...exact },
      txt: { min: 'Z', max: 'é', nulls: '0', ...exact },
      b: { min: 'false', max: 'true', nulls: '1', ...exact },
      d: { min: '1969-12-31', max: '2024-02-29', nulls: '1', ...exact },
      tm: { min: '00:00:01', max: '23:59:59.999999', nulls: '1', ...exact },
      ts: { min: '1960-01-01 00:00:00', max: '2030-06-01 12:00:00', nulls: '1', ...exact },
      tstz: { min: '1960-01-01 00:00:00+00', max: '2030-06-01 12:00:00+00', nulls: '1', ...exact },
      u: {
        min: '00000000-0000-0000-0000-000000000001',
        max: 'ffffffff-0000-0000-0000-000000000000',
        nulls: '1',
        ...exact,
      },
      jb: { min: '[1, 2]', max: '{"b": 1}', nulls: '1', ...exact },
      by: { min: '', max: '\\xFF\\x00', nulls: '1', ...exact },
      // a NULL element, an empty array and a NULL array have no leaf value: nulls, as readers count them
      'ia, list, element': { min: '-3', max: '7', nulls: '4', ...exact },
      empty: { min: null, max: null, nulls: '4', minExact: null, maxExact: null },
    });
  });

  it('keeps the bounds of each row group to its own rows', async () => {
    const meta = await duckdbMetadata(
      encode([col('i', 'integer', 23)], [['5'], ['-1'], ['9'], ['2']], 2),
    );
    expect(meta.map((m) => [m.stats_min_value, m.stats_max_value])).toEqual([
      ['-1', '5'],
      ['2', '9'],
    ]);
  });

  it('cuts long text bounds on a character boundary and marks them inexact, still bounding every value', async () => {
    const rows = [[LONG_A], [LONG_Z], ['m']];
    const file = encode([col('t', 'text', 25)], rows);
    const [{ stats_min_value: min, stats_max_value: max, min_is_exact, max_is_exact }] =
      await duckdbMetadata(file);
    expect(min).toBe('a'.repeat(STATISTICS_BYTES));
    // 'z' and 31 é (2 bytes each) fit in 64 bytes; the last é becomes ê: above every 'zé…'
    expect(max).toBe(`z${'é'.repeat(30)}ê`);
    expect([min_is_exact, max_is_exact]).toEqual([false, false]);
    // a filter DuckDB prunes with the bounds still finds each value
    for (const [v] of rows) {
      const found = await duckdb(
        file,
        `select count(*) as n from read_parquet(FILE) where t = '${v}'`,
      );
      expect(found).toEqual([{ n: '1' }]);
    }
  });

  it('orders bytes unsigned and cuts a long bytea bound to a prefix, its max incremented', () => {
    const stats = new ParquetStatistics('BYTE_ARRAY', 'binary');
    const long = Buffer.alloc(STATISTICS_BYTES + 5, 0x41);
    long[STATISTICS_BYTES - 1] = 0xff; // the last byte that fits cannot be incremented
    for (const v of [Buffer.from([0x7f]), Buffer.from([0x80]), long]) stats.bytes(v, 0, v.length);
    const s = stats.take();
    expect(s.min).toEqual(long.subarray(0, STATISTICS_BYTES));
    expect(s.minExact).toBe(false);
    expect(s.max).toEqual(Buffer.from([0x80]));
    expect(s.maxExact).toBe(true);

    for (const v of [long]) stats.bytes(v, 0, v.length);
    const above = Buffer.alloc(STATISTICS_BYTES - 1, 0x41);
    above[above.length - 1] = 0x42;
    expect(stats.take()).toEqual({
      nullCount: 0,
      min: long.subarray(0, STATISTICS_BYTES),
      max: above,
      minExact: false,
      maxExact: false,
    });
  });

  it('writes no max when nothing above a long value fits, and starts over for the next chunk', () => {
    const stats = new ParquetStatistics('BYTE_ARRAY', 'binary');
    const ones = Buffer.alloc(STATISTICS_BYTES + 1, 0xff);
    stats.bytes(ones, 0, ones.length);
    stats.bytes(Buffer.from('a'), 0, 1);
    const s = stats.take();
    expect(s.max).toBeUndefined();
    expect(s.min).toEqual(Buffer.from('a'));
    stats.bytes(Buffer.from('b'), 0, 1);
    expect(stats.take()).toEqual({
      nullCount: 0,
      min: Buffer.from('b'),
      max: Buffer.from('b'),
      minExact: true,
      maxExact: true,
    });
  });
});
