import { spawnSync } from 'node:child_process';
import { tableFromIPC } from 'apache-arrow';
import { duckdb } from '@test/support/duckdb.reader';
import { closeDb, db, execute } from './support/client';
import { open, readAll } from './support/raw';
import { ROOT } from './support/service';

afterAll(closeDb);

/** Every common type, with NULLs and edge values, three rows. */
const TYPED = `
  select * from (values
    (1, 32767::int2, 2147483647::int4, 9223372036854775807::int8, 1234567890123456789012345678901234567890.5::numeric,
     1.5::float8, 'héllo "q" 😀'::text, true, '2024-02-29'::date, '2024-01-02 03:04:05.678901+00'::timestamptz,
     '2024-01-02 03:04:05.5'::timestamp, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, '{"a": [1, 2]}'::jsonb,
     '\\xdeadbeef'::bytea, array[1, null, 3]::int[], array['x', 'y,z']::text[]),
    (2, (-32768)::int2, (-2147483648)::int4, (-9223372036854775807)::int8, 'NaN'::numeric,
     'Infinity'::float8, '', false, '1970-01-01'::date, '1969-12-31 23:59:59+00'::timestamptz,
     '1970-01-01 00:00:00'::timestamp, '00000000-0000-0000-0000-000000000000'::uuid, '[]'::jsonb,
     '\\x'::bytea, array[]::int[], array[]::text[]),
    (3, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null)
  ) t(id, i2, i4, i8, num, f8, txt, flag, d, tstz, ts, u, j, b, ai, at)`;

/** Reads a Parquet file with hyparquet (ESM-only: in a plain node process) as JSON-safe rows. */
function readParquet(file: Buffer): Record<string, unknown>[] {
  const reader = `
    const { parquetReadObjects } = require('hyparquet');
    const { compressors } = require('hyparquet-compressors');
    const data = require('node:fs').readFileSync(0);
    const file = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
    const tag = (k, v) => typeof v === 'bigint' ? 'bigint:' + v
      : v instanceof Uint8Array ? 'hex:' + Buffer.from(v).toString('hex')
      : typeof v === 'number' && !Number.isFinite(v) ? 'number:' + v : v;
    parquetReadObjects({ file, utf8: false, compressors, parsers: {
      timestampFromMicroseconds: (v) => v, dateFromDays: (v) => v,
      jsonFromBytes: (v) => v && Buffer.from(v).toString('utf8'),
      stringFromBytes: (v) => v && Buffer.from(v).toString('utf8'),
    } }).then((rows) => process.stdout.write(JSON.stringify(rows, tag)));`;
  const run = spawnSync(process.execPath, ['-e', reader], {
    cwd: ROOT,
    input: file,
    maxBuffer: 1 << 28,
  });
  if (run.status !== 0) throw new Error(`hyparquet: ${run.stderr.toString()}`);
  return JSON.parse(run.stdout.toString()) as Record<string, unknown>[];
}

/** What PostgreSQL holds, in the forms the columnar readers give back. */
async function expected(): Promise<Record<string, unknown>[]> {
  const { rows } = await db().query<Record<string, unknown>>(`
    select id, i2, i4, i8::text as i8, num::text as num, f8, txt, flag,
           (d - date '1970-01-01') as d,
           (extract(epoch from tstz) * 1000000)::bigint::text as tstz,
           (extract(epoch from ts) * 1000000)::bigint::text as ts,
           u::text as u, j::text as j, encode(b, 'hex') as b, ai, at
      from (${TYPED}) x order by id`);
  return rows;
}

/** hyparquet's rows of TYPED against what PostgreSQL holds. */
function expectTyped(rows: Record<string, unknown>[], want: Record<string, unknown>[]): void {
  expect(rows).toHaveLength(3);
  rows.forEach((row, i) => {
    const w = want[i];
    expect(row.id).toBe(w.id);
    expect(row.i2).toBe(w.i2 === null ? null : Number(w.i2));
    expect(row.i4).toBe(w.i4);
    expect(row.i8).toBe(w.i8 === null ? null : `bigint:${w.i8 as string}`);
    expect(row.num).toBe(w.num);
    expect(row.f8).toBe(w.f8 === null ? null : w.f8 === Infinity ? 'number:Infinity' : w.f8);
    expect(row.txt).toBe(w.txt);
    expect(row.flag).toBe(w.flag);
    expect(row.d).toBe(w.d);
    expect(row.tstz).toBe(w.tstz === null ? null : `bigint:${w.tstz as string}`);
    expect(row.ts).toBe(w.ts === null ? null : `bigint:${w.ts as string}`);
    expect(row.u).toBe(w.u);
    expect(row.j).toBe(w.j);
    expect(row.b).toBe(w.b === null ? null : `hex:${w.b as string}`);
    expect(row.ai ?? null).toEqual(w.ai);
    expect(row.at ?? null).toEqual(w.at);
  });
}

describe('columnar formats', () => {
  it('returns a Parquet file whose every value equals what PostgreSQL holds', async () => {
    const res = await open({ statement: TYPED }, { accept: 'application/parquet' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/parquet');
    expect(res.headers['x-query-id']).toMatch(/^[0-9a-f-]{36}$/);
    const file = await readAll(res);
    expect(file.subarray(0, 4).toString()).toBe('PAR1');
    expect(file.subarray(-4).toString()).toBe('PAR1');
    expectTyped(readParquet(file), await expected());
    // ZSTD unless asked otherwise, as users' own tools write it
    expect(await duckdb(file, 'select distinct compression from parquet_metadata(FILE)')).toEqual([
      { compression: 'ZSTD' },
    ]);
  });

  it.each(['zstd', 'snappy', 'gzip', 'none'])(
    'compresses Parquet pages as Accept asks (compression=%s), read back whole by hyparquet and DuckDB',
    async (compression) => {
      const res = await open(
        { statement: TYPED },
        { accept: `application/parquet; compression=${compression}` },
      );
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('application/parquet');
      const file = await readAll(res);
      const want = await expected();
      expectTyped(readParquet(file), want);
      const codecs = await duckdb(file, 'select distinct compression from parquet_metadata(FILE)');
      expect(codecs).toEqual([
        { compression: compression === 'none' ? 'UNCOMPRESSED' : compression.toUpperCase() },
      ]);
      const read = await duckdb(
        file,
        `select id, i2, i4, i8::varchar as i8, num, f8, txt, flag, (d - date '1970-01-01')::int as d,
                epoch_us(tstz)::varchar as tstz, epoch_us(ts)::varchar as ts, u::varchar as u,
                j::varchar as j, lower(hex(b)) as b, ai, "at"
           from read_parquet(FILE) order by id`,
      );
      expect(read).toEqual(want.map((w) => ({ ...w, f8: w.f8 === Infinity ? 'Infinity' : w.f8 })));
    },
  );

  it('refuses an unknown Parquet compression with 406, naming the values it takes', async () => {
    const res = await execute(
      { statement: 'select 1' },
      { headers: { accept: 'application/parquet; compression=lz4' } },
    );
    expect(res.status).toBe(406);
    expect(res.json.status).toEqual({
      reason: "unknown Parquet compression 'lz4'; accepted: compression=zstd|snappy|gzip|none",
      sql_state: '0A000',
      vendor_code: -105,
    });
  });

  it('returns an Arrow IPC stream whose values equal what PostgreSQL holds', async () => {
    const res = await open(
      { statement: TYPED, fetch_size: 2 },
      { accept: 'application/vnd.apache.arrow.stream' },
    );
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/vnd.apache.arrow.stream');
    const table = tableFromIPC(await readAll(res));
    const want = await expected();
    expect(table.numRows).toBe(3);
    // Two chunks of fetch_size 2: one record batch per chunk.
    expect(table.batches.length).toBe(2);
    const col = (name: string) => table.getChild(name)!.toArray() as ArrayLike<unknown>;
    expect(Array.from(col('id'))).toEqual([1, 2, 3]);
    expect([...table.getChild('i8')!].map((v) => (v === null ? null : String(v)))).toEqual(
      want.map((w) => w.i8),
    );
    expect([...table.getChild('num')!]).toEqual(want.map((w) => w.num));
    expect([...table.getChild('txt')!]).toEqual(want.map((w) => w.txt));
    expect([...table.getChild('flag')!]).toEqual(want.map((w) => w.flag));
    expect([...table.getChild('j')!]).toEqual(want.map((w) => w.j));
  });

  it('answers with the error envelope when the statement fails before any row is sent', async () => {
    for (const accept of [
      'application/parquet',
      'application/vnd.apache.arrow.stream',
      'text/csv',
    ]) {
      const res = await execute(
        { statement: 'select 1 / (g - 5) from generate_series(1, 10) g' },
        { headers: { accept } },
      );
      expect(res.status).toBe(400);
      expect(res.json.status).toMatchObject({ sql_state: '22012', vendor_code: -520 });
    }
  });

  it('writes the first and last timestamps PostgreSQL has to Parquet, and refuses those past int64 with 22008', async () => {
    const edges = `select * from (values
        ('4714-11-24 00:00:00 BC'::timestamp, '4714-11-24 00:00:00+00 BC'::timestamptz, '4714-11-24 BC'::date),
        ('294247-01-10 04:00:54.775806', '294247-01-10 04:00:54.775806+00', '5874897-12-31'),
        ('infinity', 'infinity', 'infinity'), ('-infinity', '-infinity', '-infinity')
      ) t(ts, tstz, d)`;
    const res = await open({ statement: edges }, { accept: 'application/parquet' });
    expect(res.statusCode).toBe(200);
    const max = 2n ** 63n - 1n;
    expect(readParquet(await readAll(res))).toEqual(
      [
        [-210866803200000000n, -2440588],
        [max - 1n, 2145042905],
        [max, 2147483647],
        [-max, -2147483647],
      ].map(([t, d]) => ({ ts: `bigint:${t}`, tstz: `bigint:${t}`, d: Number(d) })),
    );
    for (const accept of ['application/parquet', 'application/vnd.apache.arrow.stream']) {
      const late = await execute(
        { statement: "select '294276-12-31 23:59:59'::timestamp as ts" },
        { headers: { accept } },
      );
      expect(late.status).toBe(400);
      expect(late.json.status).toEqual({
        reason: expect.stringMatching(/^timestamp 294276-12-31 23:59:59 is out of range/),
        sql_state: '22008',
        vendor_code: -520,
      });
    }
  });

  it.each(['application/parquet', 'application/vnd.apache.arrow.stream'])(
    'cuts a %s response that fails after its first bytes, so that it cannot pass for a whole file',
    async (accept) => {
      // distinct pads (a dictionary would shrink equal ones): row groups fill before the failure
      const statement =
        "select g, repeat('x', 200) || g as pad, 1 / (150000 - g) as boom from generate_series(1, 200000) g";
      const res = await open({ statement, fetch_size: 1000 }, { accept });
      expect(res.statusCode).toBe(200);
      await expect(readAll(res)).rejects.toThrow(/cut short|aborted/);
    },
  );

  it('round-trips a larger Parquet result across several row groups', async () => {
    const res = await open(
      { statement: 'select g, md5(g::text) as h, g * 1.5 as f from generate_series(1, 200000) g' },
      { accept: 'application/parquet' },
    );
    const rows = readParquet(await readAll(res));
    expect(rows).toHaveLength(200000);
    expect(rows[199999]).toEqual({
      g: 200000,
      h: '03e6c61603f6c550ab49ab6a2d83f793',
      f: '300000.0',
    });
  });
});
