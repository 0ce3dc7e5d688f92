// A pool thread's reading of a large result alone, two ways in one run: its statement socket
// reading as Node does (a new Buffer a read) and reading into the thread's one shared buffer
// (`statementSocket`, what LoginPools uses). Both read the stored 1M-row table of
// large-result.mjs with the worker's own TextCursor (rows copied as bytes, not encoded, not sent),
// in this process's main thread; the two ways alternate, BENCH_ROUNDS times each. Printed: this
// process's CPU for a read (its threads together: V8's GC helpers included), its wall time, and
// its scavenges and mark-compacts.
//
//   npm run build && node bench/socket-reads.mjs          BENCH_ROUNDS=5 BENCH_FETCH=10000
//
// BENCH_KEEP_TABLE=1 keeps the table for a later run (large-result.mjs reads the same one).
import { PerformanceObserver, constants } from 'node:perf_hooks';
import pg from 'pg';
import { createStoredTable, storedTableName } from './lib/exports.mjs';
import {
  DATABASE_URL,
  envInt,
  installGuards,
  loadAverage,
  median,
  reportHeader,
  requireDist,
  runMain,
  storedTable,
} from './lib/service.mjs';

const ROUNDS = envInt('BENCH_ROUNDS', 5);
const FETCH = envInt('BENCH_FETCH', 10_000);
const ROWS = 1_000_000;
const TABLE = storedTableName(ROWS);
const KEEP_TABLE = process.env.BENCH_KEEP_TABLE === '1';

installGuards((120 + 30 * ROUNDS) * 1000);

const { TextCursor } = requireDist('libs/execution/src/tasks/text.cursor.js');
const { statementSocket } = requireDist('libs/execution/src/tasks/login.pools.js');

let collections = { scavenges: 0, markCompacts: 0 };
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if (entry.detail.kind === constants.NODE_PERFORMANCE_GC_MINOR) collections.scavenges++;
    if (entry.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) collections.markCompacts++;
  }
}).observe({ entryTypes: ['gc'] });

/** Reads the whole table on a new connection; `shared`: through statementSocket. */
async function readOnce(shared) {
  const client = new pg.Client({
    connectionString: DATABASE_URL,
    ...(shared ? { stream: statementSocket } : {}),
  });
  await client.connect();
  try {
    collections = { scavenges: 0, markCompacts: 0 };
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const cursor = client.query(new TextCursor(`select * from ${TABLE}`, [], []));
    let rows = 0;
    for (;;) {
      const batch = await cursor.readBatch(FETCH);
      if (batch.length === 0) break;
      rows += batch.length;
    }
    await cursor.closePortal();
    const cpu = process.cpuUsage(cpuBefore);
    if (rows !== ROWS) throw new Error(`read ${rows} rows, not ${ROWS}`);
    return {
      cpuMs: (cpu.user + cpu.system) / 1000,
      wallMs: performance.now() - started,
      ...collections,
    };
  } finally {
    await client.end();
  }
}

const ways = [
  ['Node reads (a new Buffer a read)', false],
  ['one shared read buffer (statementSocket)', true],
];

await runMain(async () => {
  const load = loadAverage();
  await storedTable(TABLE, createStoredTable(TABLE, ROWS), { keep: KEEP_TABLE });
  // Warm-up: the code paths compiled and the table in PostgreSQL's cache, for both ways.
  for (const [, shared] of ways) await readOnce(shared);
  const runs = new Map(ways.map(([name]) => [name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, shared] of ways) runs.get(name).push(await readOnce(shared));
  }

  console.log(
    reportHeader("socket-reads.mjs: a large result's reading in a pool thread", load).join('\n'),
  );
  console.log(
    `- \`select * from ${TABLE}\` (the stored table of large-result.mjs) through TextCursor, ${FETCH} rows a read; ` +
      `${ROUNDS} rounds, the two ways alternated; medians\n`,
  );
  console.log('| socket | CPU ms | wall ms | scavenges | mark-compacts |');
  console.log('|---|---:|---:|---:|---:|');
  for (const [name] of ways) {
    const all = runs.get(name);
    const of = (key) => median(all.map((r) => r[key]));
    console.log(
      `| ${name} | ${of('cpuMs').toFixed(0)} | ${of('wallMs').toFixed(0)} | ${of('scavenges')} | ${of('markCompacts')} |`,
    );
  }
  const [node, shared] = ways.map(([name]) => median(runs.get(name).map((r) => r.cpuMs)));
  console.log(
    `\nCPU with the shared buffer: ${((shared / node - 1) * 100).toFixed(0)}% against Node's reads.`,
  );
});
