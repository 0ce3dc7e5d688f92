// Isolation (issue 3): do large exports hurt small queries? Four clients export 1M rows each (Parquet,
// or stream+json when this build answers 406 to Parquet; BENCH_EXPORT_ACCEPT asks for another
// format, BENCH_EXPORT_SOURCE=table reads a stored table), back to back, while four other clients run
// small queries in a closed loop. Measured: the small queries' latency (p50/p99), against the same
// load without exports, and the api's event-loop delay from its Prometheus /metrics
// (`nodejs_eventloop_lag_*`, prom-client; reset at each scrape, so one scrape at the start of a
// window and one at its end cover exactly that window). Run by hand:
//
//   npm run build && node bench/isolation.mjs
//
// Bounded in time. Everything it starts (child processes, Redis keys) is removed at the end, also
// on error and on Ctrl-C. See bench/README.md for the settings.
import http from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  cpuLine,
  cpuPercent,
  cpuSnapshot,
  envInt,
  installGuards,
  isOkJson,
  loadAverage,
  mb,
  met,
  ms,
  percentile,
  printChildOutput,
  reportHeader,
  request,
  runMain,
  onCleanup,
  sluiceCpuGroups,
  startChild,
  staleBuildWarning,
  startSluice,
  unlessDied,
  executeOptions,
  storedTable,
  SMALL_STATEMENT,
} from './lib/service.mjs';
import {
  createStoredTable,
  exportStatement,
  startExports,
  storedTableName,
} from './lib/exports.mjs';

const EXPORT_ROWS = envInt('BENCH_ROWS', 1_000_000);
const EXPORTS = envInt('BENCH_EXPORTS', 4);
const CLIENTS = envInt('BENCH_CONCURRENCY', 4);
const SECONDS = envInt('BENCH_SECONDS', 30);
const BASE_SECONDS = envInt('BENCH_BASELINE_SECONDS', 10);
const WARMUP_SECONDS = envInt('BENCH_WARMUP_SECONDS', 3);
// Small queries before the baseline, not measured: Sluice's processes take tens of seconds under
// load to reach their speed (bench/README.md, small queries).
const SERVICE_WARMUP_SECONDS = envInt('BENCH_SERVICE_WARMUP_SECONDS', 30);
// 1: the scaled shape on one machine — an interactive worker and an export worker of its own
// (at its default nice 10) — instead of one worker serving both lanes.
const SPLIT_LANES = envInt('BENCH_SPLIT_LANES', 0) === 1;
// What the exports ask for: Parquet by default (the export lane); application/stream+json or
// text/csv make them large results of the interactive lane, which does not give way.
const EXPORT_ACCEPT = process.env.BENCH_EXPORT_ACCEPT ?? 'application/parquet';
// generated: the rows made by the statement (PostgreSQL's work a large share); table: read from
// large-result.mjs's stored table, made first if need be (kept with BENCH_KEEP_TABLE=1).
const EXPORT_SOURCE = process.env.BENCH_EXPORT_SOURCE ?? 'generated';
if (!['table', 'generated'].includes(EXPORT_SOURCE)) {
  throw new Error('BENCH_EXPORT_SOURCE must be table or generated');
}
const SMALL = SMALL_STATEMENT;
const GOAL_P99_MS = 50;
const GOAL_LOOP_P99_MS = 20;

installGuards((SERVICE_WARMUP_SECONDS + BASE_SECONDS + WARMUP_SECONDS + SECONDS + 150) * 1000);

const EXPORT_TABLE = storedTableName(EXPORT_ROWS);
const EXPORT_SQL =
  EXPORT_SOURCE === 'table' ? `select * from ${EXPORT_TABLE}` : exportStatement(EXPORT_ROWS);

// ---------------------------------------------------------------------------------------------

/** The api's event-loop figures from /metrics (seconds → ms); undefined without /metrics. */
async function loopLag(sluice) {
  const res = await request(new URL('/metrics', sluice.baseUrl), { timeoutMs: 5000 });
  if (res.status !== 200) return undefined;
  const pick = (name) => {
    const m = new RegExp(`^${name}(?:\\{[^}]*\\})?\\s+([0-9.eE+-]+)`, 'm').exec(res.body);
    return m ? Number(m[1]) * 1000 : NaN;
  };
  return {
    p50: pick('nodejs_eventloop_lag_p50_seconds'),
    p90: pick('nodejs_eventloop_lag_p90_seconds'),
    p99: pick('nodejs_eventloop_lag_p99_seconds'),
    max: pick('nodejs_eventloop_lag_max_seconds'),
    mean: pick('nodejs_eventloop_lag_mean_seconds'),
  };
}

/** Closed-loop small queries for `seconds`; latencies of good answers, errors counted. */
async function smallLoad(sluice, seconds) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
  const options = executeOptions(sluice, SMALL, agent);
  const target = new URL('/v1/execute', sluice.baseUrl);
  const latencies = [];
  const errorSamples = [];
  let errors = 0;
  const stopAt = performance.now() + seconds * 1000;
  async function client() {
    while (performance.now() < stopAt) {
      const start = performance.now();
      const res = await request(target, options);
      const took = performance.now() - start;
      if (isOkJson(res, 10)) latencies.push(took);
      else {
        errors++;
        if (errorSamples.length < 5)
          errorSamples.push(`HTTP ${res.status}: ${res.body.slice(0, 200)}`);
      }
    }
  }
  await Promise.all(Array.from({ length: CLIENTS }, client));
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    rps: latencies.length / seconds,
    p50: percentile(latencies, 50),
    p90: percentile(latencies, 90),
    p99: percentile(latencies, 99),
    max: latencies.at(-1),
    errors,
    errorSamples,
  };
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const loadAtStart = loadAverage();
  const warning = staleBuildWarning();
  if (warning) console.error(warning);
  // One user sends everything, at default settings: alone, its exports borrow every export slot
  // but one past its share (SLUICE_WORKER_USER_SHARE_PERCENT), as any user alone does.
  const sluice = await startSluice({
    env: {
      // One user sends every small query and export: its admission cap (default 16) is lifted
      // above the load, as small-queries.mjs does, so that none is refused. Every other setting
      // is the default.
      SLUICE_MAX_ACTIVE_PER_USER: String(Math.max(16, 2 * (CLIENTS + EXPORTS))),
      ...(SPLIT_LANES ? { SLUICE_WORKER_LANES: 'interactive' } : {}),
    },
  });
  let exportWorker;
  if (SPLIT_LANES) {
    exportWorker = startChild('export worker', 'dist/apps/worker/src/main.js', {
      ...sluice.env,
      SLUICE_WORKER_LANES: 'export',
    });
    onCleanup(exportWorker.stop);
    sluice.children.push(exportWorker);
    // Parquet is admitted once the export worker beats.
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(200)) {
      if (exportWorker.lines.some((l) => l.includes('ready'))) break;
    }
    await sleep(1_000);
  }

  if (EXPORT_SOURCE === 'table') {
    await storedTable(EXPORT_TABLE, createStoredTable(EXPORT_TABLE, EXPORT_ROWS), {
      keep: process.env.BENCH_KEEP_TABLE === '1',
    });
  }
  // Parquet if this build has it, stream+json otherwise.
  const probe = await request(new URL('/v1/execute', sluice.baseUrl), {
    method: 'POST',
    headers: {
      ...sluice.headers,
      'content-type': 'application/json',
      accept: 'application/parquet',
    },
    body: JSON.stringify({ statement: 'select 1 as x' }),
  });
  const asksParquet = EXPORT_ACCEPT === 'application/parquet';
  const parquet = probe.status === 200;
  const accept = !asksParquet ? EXPORT_ACCEPT : parquet ? EXPORT_ACCEPT : 'application/stream+json';
  console.log(
    !asksParquet || parquet
      ? `exports: ${accept}`
      : `exports: application/stream+json (Parquet answered HTTP ${probe.status}: not available)`,
  );
  const metricsAvailable = (await loopLag(sluice)) !== undefined;
  console.log(`api /metrics: ${metricsAvailable ? 'available' : 'not available'}`);

  // The bench's own event loop: if it lags, client-side latencies include it.
  const benchLoop = monitorEventLoopDelay({ resolution: 10 });
  const groups = sluiceCpuGroups(sluice);
  if (exportWorker) groups['export worker'] = [exportWorker.pid];

  process.stdout.write(
    `warm-up, not measured: ${CLIENTS} clients, ${SERVICE_WARMUP_SECONDS} s ... `,
  );
  await unlessDied(sluice, smallLoad(sluice, SERVICE_WARMUP_SECONDS));
  console.log('done');

  // 1. Baseline: small queries alone.
  process.stdout.write(`baseline: ${CLIENTS} clients, ${BASE_SECONDS} s ... `);
  await loopLag(sluice); // resets the api's histogram
  benchLoop.enable();
  let cpuBefore = cpuSnapshot(groups);
  const base = await unlessDied(sluice, smallLoad(sluice, BASE_SECONDS));
  const baseCpu = cpuPercent(cpuBefore, cpuSnapshot(groups));
  const baseLag = await loopLag(sluice);
  benchLoop.disable();
  const baseBenchLag = benchLoop.percentile(99) / 1e6;
  benchLoop.reset();
  console.log(`p50 ${ms(base.p50)} ms, p99 ${ms(base.p99)} ms`);

  // 2. The same load while EXPORTS clients export back to back.
  process.stdout.write(
    `with ${EXPORTS} exports of ${EXPORT_ROWS} rows: ${WARMUP_SECONDS} s warm-up + ${SECONDS} s ... `,
  );
  const exportsStart = performance.now();
  const exporters = startExports(sluice, {
    statement: EXPORT_SQL,
    accept,
    clients: EXPORTS,
  });
  await unlessDied(sluice, sleep(WARMUP_SECONDS * 1000));
  await loopLag(sluice);
  benchLoop.enable();
  cpuBefore = cpuSnapshot(groups);
  const loaded = await unlessDied(sluice, smallLoad(sluice, SECONDS));
  const loadedCpu = cpuPercent(cpuBefore, cpuSnapshot(groups));
  const loadedLag = await loopLag(sluice);
  benchLoop.disable();
  const loadedBenchLag = benchLoop.percentile(99) / 1e6;
  const exportResult = await exporters.stop();
  const exportSeconds = (performance.now() - exportsStart) / 1000;
  console.log(`p50 ${ms(loaded.p50)} ms, p99 ${ms(loaded.p99)} ms`);

  const okExports = exportResult.done.filter((r) => r.ok);
  const failedExports = exportResult.done.filter((r) => !r.ok);
  const exportBytes =
    exportResult.done.reduce((a, r) => a + r.bytes, 0) + exportResult.partialBytes;
  // Rows/s from bytes: a complete export tells how many bytes a row takes in this format.
  const bytesPerRow = okExports.length > 0 ? okExports[0].bytes / EXPORT_ROWS : undefined;
  if (loaded.errors > 0 || failedExports.length > 0) printChildOutput(sluice);

  const row = (label, r, lag, benchLag) =>
    `| ${label} | ${r.requests} | ${r.rps.toFixed(0)} | ${ms(r.p50)} | ${ms(r.p90)} | ${ms(r.p99)} | ${ms(r.max)} | ${r.errors} | ${lag ? `${ms(lag.p50)} / ${ms(lag.p99)} / ${ms(lag.max)}` : 'n/a'} | ${ms(benchLag)} |`;
  const out = [
    ...reportHeader(
      `Isolation, ${EXPORTS} exports of ${EXPORT_ROWS.toLocaleString('en-US')} rows`,
      loadAtStart,
    ),
    `- Exports: ${EXPORTS} clients, each exporting the mixed-type rows of bench/large-result.mjs (${EXPORT_SOURCE === 'table' ? `the stored table \`${EXPORT_TABLE}\`` : 'generated by the statement'}), ${EXPORT_ROWS.toLocaleString('en-US')} rows back to back, \`Accept: ${accept}\`${!asksParquet || parquet ? '' : ' — **Parquet is not available in this build (406), stream+json used instead**'}, bodies read at full speed and discarded`,
    `- Workers: ${SPLIT_LANES ? `one serving the interactive lane and one serving the export lane (nice ${process.env.SLUICE_EXPORT_WORKER_NICE ?? 10}), each with the default threads` : 'one, serving both lanes: its interactive pool (default threads) and an export pool of its own at nice 10'}`,
    `- Small queries: ${CLIENTS} keep-alive clients, closed loop, \`${SMALL}\`; ${BASE_SECONDS} s alone (after ${SERVICE_WARMUP_SECONDS} s of them unmeasured), then ${SECONDS} s after ${WARMUP_SECONDS} s of exports`,
    `- Exports during the run: ${okExports.length} complete, ${failedExports.length} failed${
      failedExports.length
        ? ` (${failedExports
            .slice(0, 3)
            .map((r) => `HTTP ${r.status ?? 0}`)
            .join(', ')})`
        : ''
    }, ${mb(exportBytes)} MB received in ${exportSeconds.toFixed(1)} s (${mb(exportBytes / exportSeconds)} MiB/s${bytesPerRow ? `, about ${Math.round(exportBytes / bytesPerRow / exportSeconds).toLocaleString('en-US')} rows/s` : ''})`,
    `- api event-loop delay: ${metricsAvailable ? "prom-client's `nodejs_eventloop_lag_{p50,p99,max}_seconds` from the api's /metrics over each window (monitorEventLoopDelay, 10 ms resolution: an idle loop reads about 10 ms)" : 'not measurable: the api has no /metrics'}; bench loop p99 is the client process's own delay (it inflates client-side latency when high)`,
    '',
    '| phase | requests | req/s | p50 ms | p90 ms | p99 ms | max ms | errors | api loop p50 / p99 / max ms | bench loop p99 ms |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    row('small queries alone', base, baseLag, baseBenchLag),
    row(`with ${EXPORTS} exports`, loaded, loadedLag, loadedBenchLag),
    '',
    'Goals (with the exports running):',
    '',
    `- small-query p99 < ${GOAL_P99_MS} ms: **${ms(loaded.p99)} ms** — ${met(loaded.p99 < GOAL_P99_MS)}`,
    loadedLag
      ? `- api event-loop delay p99 < ${GOAL_LOOP_P99_MS} ms: **${ms(loadedLag.p99)} ms** — ${met(loadedLag.p99 < GOAL_LOOP_P99_MS)}`
      : `- api event-loop delay p99 < ${GOAL_LOOP_P99_MS} ms: not measurable (no /metrics)`,
    '',
    'CPU (100% = one core):',
    '',
    `- alone: ${cpuLine(baseCpu)}`,
    `- with exports: ${cpuLine(loadedCpu)}`,
  ];
  for (const [label, r] of [
    ['alone', base],
    ['with exports', loaded],
  ]) {
    if (r.errorSamples.length > 0)
      out.push('', `First errors (${label}):`, ...r.errorSamples.map((s) => `    ${s}`));
  }
  console.log(`\n${out.join('\n')}\n`);
}

await runMain(main);
