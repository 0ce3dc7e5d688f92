// The Parquet encoder alone, in this process: the rows of a stored table (large-result.mjs's, kept
// with BENCH_KEEP_TABLE=1) read once as PostgreSQL's text, held as RowBatches of BENCH_BATCH rows,
// then encoded BENCH_RUNS times with the default settings; prints wall and CPU time and the file's
// size and sha1 for each run. Give the checkouts to compare as arguments (each built with `npm run
// build`), e.g. `node bench/parquet-encode.mjs /work/main /work/my-branch`: they run alternately,
// so that the machine's load spreads over both, and the same rows must give the same file.
import crypto from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import { hardTimeLimit, staleBuildWarning } from './lib/env.mjs';
import { DATABASE_URL, envInt } from './lib/service.mjs';

const ROWS = envInt('BENCH_ROWS', 1_000_000);
const TABLE = process.env.BENCH_TABLE || `bench_large_result_${ROWS}`;
const RUNS = envInt('BENCH_RUNS', 4);
const BATCH = envInt('BENCH_BATCH', 5000);
const roots = process.argv.slice(2).map((p) => path.resolve(p));
if (roots.length === 0) roots.push(path.resolve(import.meta.dirname, '..'));
// Reading the table and a run of each build take seconds each: whatever happens, it ends by then.
hardTimeLimit((RUNS * roots.length * 30 + 120) * 1000);
for (const root of roots) {
  const warning = staleBuildWarning(root);
  if (warning) console.error(`${root}: ${warning}`);
}

const client = new pg.Client({
  connectionString: DATABASE_URL,
  types: { getTypeParser: () => (v) => v }, // every value as PostgreSQL's text
});
await client.connect();
const res = await client.query({ text: `select * from ${TABLE}`, rowMode: 'array' });
const columns = [];
for (const f of res.fields) {
  const t = await client.query('select format_type($1, null) as type', [f.dataTypeID]);
  columns.push({ name: f.name, type: t.rows[0].type, oid: f.dataTypeID, json: (s) => s });
}
await client.end();

const builds = await Promise.all(
  roots.map(async (root) => ({
    root,
    formats: await import(path.join(root, 'dist/libs/formats/src/index.js')),
  })),
);
// Each build's own RowBatch; the bytes are the same.
const texts = [];
for (let i = 0; i < res.rows.length; i += BATCH) texts.push(res.rows.slice(i, i + BATCH));
const batchesOf = new Map(builds.map((b) => [b, texts.map((t) => b.formats.RowBatch.fromText(t))]));
texts.length = 0;
res.rows.length = 0;
console.log(
  `${TABLE}: ${ROWS} rows in batches of ${BATCH}; ${RUNS} runs of each build, alternated`,
);

for (let run = 1; run <= RUNS; run++) {
  for (const build of builds) {
    const { ParquetEncoder, RowBatch } = build.formats;
    // New batch objects: a batch keeps the text it decoded.
    const batches = batchesOf
      .get(build)
      .map((b) => new RowBatch(b.length, b.columns, b.bytes, b.starts, b.ends));
    const cpu = process.cpuUsage();
    const started = performance.now();
    const encoder = new ParquetEncoder({ queryId: 'bench', layout: 'array', columns });
    const hash = crypto.createHash('sha1');
    let bytes = 0;
    const add = (b) => {
      hash.update(b);
      bytes += b.length;
    };
    add(encoder.head());
    for (const b of batches) add(encoder.rows(b));
    add(encoder.end({ reason: 'OK', sql_state: '00000', vendor_code: 0 }, false));
    const wall = performance.now() - started;
    const used = process.cpuUsage(cpu);
    console.log(
      `run ${run} ${build.root}: ${wall.toFixed(0)} ms wall, ${((used.user + used.system) / 1000).toFixed(0)} ms CPU, ` +
        `${bytes} bytes, sha1 ${hash.digest('hex').slice(0, 12)}`,
    );
  }
}
