// The size of Sluice's default Parquet file against DuckDB's ZSTD file of the same rows (issue 39:
// at most 1.15×), and what dictionary encoding changes: a stored table of the issue's column mix is
// read with pg-cursor in text mode, 1,000 rows at a time (as the worker reads), and fed to two
// encoders in turn — the default (ZSTD, dictionary) and the same without a dictionary — timing
// only the encoders' own calls. DuckDB then rewrites the default file, as a user would, with ZSTD
// and with its default codec; parquet_metadata() of each file gives the bytes and encodings of
// every column. DuckDB also checks that both Sluice files hold the same rows.
//
//   npm run build && node bench/parquet-dictionary.mjs          # 1M rows: about 1 minute
//   BENCH_ROWS=100000 node bench/parquet-dictionary.mjs          # a quick look
//
//   BENCH_VARIANT=repeating node bench/parquet-dictionary.mjs    # jsonb and text of few values
//
// The table (bench_parquet_<variant>_<rows>) is created in the set-up and dropped at the end,
// unless BENCH_KEEP_TABLE=1 (a later run with the same rows then reuses it).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { envInt, hardTimeLimit, requireDist } from './lib/env.mjs';
import { reportHeader, loadAverage, met } from './lib/service.mjs';

const require = createRequire(import.meta.url);
const ROWS = envInt('BENCH_ROWS', 1_000_000);
const CHUNK = envInt('BENCH_FETCH_SIZE', 1000);
const DATABASE_URL = process.env.BENCH_DATABASE_URL || 'postgresql://root@127.0.0.1:5432/test';
const KEEP_TABLE = process.env.BENCH_KEEP_TABLE === '1';
const VARIANT = process.env.BENCH_VARIANT || 'issue';
const TABLE = `bench_parquet_${VARIANT}_${ROWS}`;
const GOAL_RATIO = 1.15;
const OK = { reason: 'OK', sql_state: '00000', vendor_code: 0 };

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-parquet-dictionary-'));
let dropTable = async () => {};
const limit = hardTimeLimit(240_000, () => fs.rmSync(dir, { recursive: true, force: true }));

// The issue's mix: int, bigint, numeric, text, timestamptz, bool, jsonb, float8 and a mostly-NULL
// text. `issue`: the first eight as bench/large-result.mjs makes them (its jsonb and text are all
// distinct); `repeating`: the text, jsonb and numeric of few values, as labels and documents often are.
const VARIANTS = {
  issue: `md5(g::text) as t, jsonb_build_object('g', g, 'h', md5(g::text)) as j,
    (g / 7.0)::numeric(20,6) as n`,
  repeating: `'label ' || (g % 5000) as t,
    jsonb_build_object('n', g % 1000, 'tag', 'x', 'ok', g % 3 = 0) as j,
    ((g % 1000) / 4.0)::numeric(20,6) as n`,
};
if (!(VARIANT in VARIANTS))
  throw new Error(`BENCH_VARIANT must be one of ${Object.keys(VARIANTS)}`);
const CREATE = `create table ${TABLE} as select g::int as i, (g::bigint * 1000003) as b,
  ${VARIANTS[VARIANT]}, timestamptz '2024-01-01' + g * interval '1 second' as ts,
  (g % 2 = 0) as flag, g / 3.0::float8 as f,
  case when g % 20 = 0 then 'note ' || (g % 7) end as sparse
  from generate_series(1, ${ROWS}) g`;

const ENCODERS = [
  { label: 'Sluice default (ZSTD, dictionary)', file: 'sluice.parquet', settings: {} },
  { label: 'Sluice ZSTD, no dictionary', file: 'plain.parquet', settings: { dictionaryBytes: 0 } },
];

async function setUp(client) {
  const exists = await client.query('select to_regclass($1) as t', [TABLE]);
  if (exists.rows[0].t === null) {
    console.error(`creating ${TABLE} …`);
    await client.query(CREATE);
    await client.query(`analyze ${TABLE}`);
  }
  if (!KEEP_TABLE) dropTable = () => client.query(`drop table if exists ${TABLE}`);
  const size = await client.query(`select pg_total_relation_size($1) as n`, [TABLE]);
  return Number(size.rows[0].n);
}

/** Reads the table as the worker does and encodes it with each encoder; returns the times. */
async function encodeAll(client) {
  const Cursor = require('pg-cursor');
  const { ParquetEncoder } = requireDist('libs/formats/src/parquet.encoder.js');
  const { RowBatch } = requireDist('libs/formats/src/row.batch.js');
  const raw = { getTypeParser: () => (v) => v };
  await client.query("SET TimeZone = 'UTC'; SET DateStyle = 'ISO'; SET IntervalStyle = 'postgres'");
  await client.query('BEGIN');
  const cursor = client.query(
    new Cursor(`select * from ${TABLE} order by i`, [], { rowMode: 'array', types: raw }),
  );
  let rows = await cursor.read(CHUNK);
  const columns = cursor._result.fields.map((f) => ({
    name: f.name,
    type: f.dataTypeID === 1184 ? 'timestamp with time zone' : 'x',
    oid: f.dataTypeID,
    json: (v) => v,
  }));
  const runs = ENCODERS.map((e) => {
    const encoder = new ParquetEncoder({ queryId: 'bench', layout: 'array', columns }, e.settings);
    const fd = fs.openSync(path.join(dir, e.file), 'w');
    fs.writeSync(fd, encoder.head());
    return { ...e, encoder, fd, ms: 0 };
  });
  let n = 0;
  while (rows.length > 0) {
    n += rows.length;
    for (const run of runs) {
      // As the worker hands a read over (its cursor gathers rows into a batch): not timed.
      const batch = RowBatch.fromText(rows);
      const t = performance.now();
      const out = run.encoder.rows(batch);
      run.ms += performance.now() - t;
      if (out.length > 0) fs.writeSync(run.fd, out);
    }
    rows = await cursor.read(CHUNK);
  }
  for (const run of runs) {
    const t = performance.now();
    const out = run.encoder.end(OK, false);
    run.ms += performance.now() - t;
    fs.writeSync(run.fd, out);
    fs.closeSync(run.fd);
  }
  await cursor.close();
  await client.query('COMMIT');
  if (n !== ROWS) throw new Error(`read ${n} rows, expected ${ROWS}`);
  return runs.map(({ label, file, ms }) => ({ label, file, ms }));
}

async function duckdbRun(connection, sql) {
  const reader = await connection.runAndReadAll(sql);
  return reader.getRowObjectsJson();
}

/** Bytes, encodings and dictionary pages of each column of a file, from parquet_metadata(). */
async function columnsOf(connection, file) {
  return duckdbRun(
    connection,
    `select path_in_schema as col, sum(total_compressed_size)::bigint as bytes,
       string_agg(distinct encodings, ' / ') as encodings,
       count(dictionary_page_offset) as dict_groups, count(*) as groups
     from parquet_metadata('${path.join(dir, file)}') group by path_in_schema, column_id
     order by column_id`,
  );
}

async function main() {
  const loadAtStart = loadAverage();
  const pg = require('pg');
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  let report;
  try {
    const tableBytes = await setUp(client);
    console.error(`encoding ${ROWS} rows …`);
    const encoded = await encodeAll(client);

    const { DuckDBInstance } = require('@duckdb/node-api');
    const instance = await DuckDBInstance.create(':memory:');
    const connection = await instance.connect();
    const sluice = path.join(dir, 'sluice.parquet');
    const rewrites = [
      { label: 'DuckDB rewrite, ZSTD', file: 'duck-zstd.parquet', options: 'COMPRESSION zstd' },
      { label: 'DuckDB rewrite, default (SNAPPY)', file: 'duck-default.parquet', options: '' },
    ];
    for (const r of rewrites) {
      console.error(`${r.label} …`);
      const t = performance.now();
      const options = ['FORMAT parquet', r.options].filter(Boolean).join(', ');
      await duckdbRun(
        connection,
        `COPY (select * from read_parquet('${sluice}')) TO '${path.join(dir, r.file)}' (${options})`,
      );
      r.ms = performance.now() - t;
    }
    // the two Sluice files hold the same rows (and DuckDB reads every page of both)
    const plain = path.join(dir, 'plain.parquet');
    const [diff] = await duckdbRun(
      connection,
      `select (select count(*) from (from read_parquet('${sluice}') except all from read_parquet('${plain}')))
        + (select count(*) from (from read_parquet('${plain}') except all from read_parquet('${sluice}'))) as n,
        (select count(*) from read_parquet('${sluice}')) as rows`,
    );
    const files = [...encoded, ...rewrites];
    for (const f of files) {
      f.bytes = fs.statSync(path.join(dir, f.file)).size;
      f.columns = await columnsOf(connection, f.file);
    }
    connection.closeSync();
    instance.closeSync();

    const mb = (b) => (b / 1e6).toFixed(1);
    const duckZstd = files.find((f) => f.file === 'duck-zstd.parquet').bytes;
    const ratio = files[0].bytes / duckZstd;
    report = [
      ...reportHeader(
        `Parquet dictionary encoding (\`parquet-dictionary.mjs\`), ${ROWS} rows, variant ${VARIANT}`,
        loadAtStart,
      ),
      `- Table ${TABLE}: ${mb(tableBytes)} MB stored; read with pg-cursor in text mode, ${CHUNK} rows a read; ${CREATE.replace(/\s+/g, ' ')}`,
      `- Rows read back equal (DuckDB, dictionary file EXCEPT ALL PLAIN file, both ways): ${diff.n === '0' && Number(diff.rows) === ROWS ? 'yes' : `**no** (${diff.n} differ, ${diff.rows} rows)`}`,
      '',
      '| file | MB | × DuckDB ZSTD | time s |',
      '|---|---:|---:|---:|',
      ...files.map(
        (f) =>
          `| ${f.label} | ${mb(f.bytes)} | ${(f.bytes / duckZstd).toFixed(2)}× | ${(f.ms / 1000).toFixed(2)} |`,
      ),
      '',
      "Time: the encoder's own calls for Sluice (one thread); the whole rewrite (reading Sluice's file included, DuckDB's threads) for DuckDB.",
      '',
      `Per column: MB (encodings; row groups with a dictionary page / row groups)`,
      '',
      `| column | ${files.map((f) => f.label).join(' | ')} |`,
      `|---|${files.map(() => '---').join('|')}|`,
      ...files[0].columns.map(
        (c, i) =>
          `| ${c.col} | ${files
            .map((f) => {
              const k = f.columns[i];
              return `${(Number(k.bytes) / 1e6).toFixed(2)} (${k.encodings}; ${k.dict_groups}/${k.groups})`;
            })
            .join(' | ')} |`,
      ),
      '',
      `- Goal (issue 39): default file ≤ ${GOAL_RATIO}× DuckDB's ZSTD file: ${ratio.toFixed(2)}×, ${met(ratio <= GOAL_RATIO)}`,
    ];
  } finally {
    await dropTable();
    await client.end();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log(report.join('\n'));
  void limit;
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
