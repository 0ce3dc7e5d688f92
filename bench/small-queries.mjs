// Small-query throughput and latency: Sluice (api + worker over Redis) against a direct node:http + pg
// endpoint, same machine, same statement, same load. Run by hand (never in CI):
//
//   npm run build && node bench/small-queries.mjs
//
// Needs PostgreSQL and Redis on loopback. Bounded in time: warm-up + duration per target, plus a
// hard overall limit. Everything it starts (child processes, Redis keys) is removed at the end, also
// on error and on Ctrl-C. See bench/README.md for the settings.
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  DATABASE_URL,
  REDIS_URL,
  cpuPercent,
  cpuSnapshot,
  deleteRedisKeys,
  envInt,
  gitDescription,
  installGuards,
  isOkJson,
  loadAverage,
  machineDescription,
  onCleanup,
  percentile,
  request,
  runMain,
  staleBuildWarning,
  START_TIMEOUT_MS,
  startChild,
  startSluice,
} from './lib/service.mjs';

const SETTINGS = {
  databaseUrl: DATABASE_URL,
  redisUrl: REDIS_URL,
  seconds: envInt('BENCH_SECONDS', 10),
  warmupSeconds: envInt('BENCH_WARMUP_SECONDS', 2),
  concurrency: envInt('BENCH_CONCURRENCY', 32),
  requestTimeoutMs: 10_000,
  startTimeoutMs: START_TIMEOUT_MS,
  statement: 'select g, md5(g::text) from generate_series(1,10) g',
  expectedRows: 10,
};
// Goals from the issue.
// Goals (issue 13): at least 2,400 req/s (3× the ≈770 it measured), then 0.25× the floor.
const GOAL_RPS = 2_400;
const GOAL_THROUGHPUT_RATIO = 0.25;
// Whatever happens (hung child, stuck socket), the bench ends by then.
const HARD_LIMIT_MS =
  2 * (SETTINGS.warmupSeconds + SETTINGS.seconds) * 1000 + 3 * SETTINGS.startTimeoutMs + 30_000;
installGuards(HARD_LIMIT_MS);

/** A whole, successful result: every row there, and (Sluice) the final status says OK. */
const isGoodResult = (res) => isOkJson(res, SETTINGS.expectedRows);

// ---------------------------------------------------------------------------------------------
// Load: N keep-alive clients in a closed loop; only requests started after the warm-up count.

async function runLoad({ label, url, headers = {}, cpuGroups }) {
  const { concurrency, warmupSeconds, seconds } = SETTINGS;
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const body = Buffer.from(JSON.stringify({ statement: SETTINGS.statement }));
  const options = {
    method: 'POST',
    agent,
    body,
    headers: { 'content-type': 'application/json', 'content-length': body.length, ...headers },
  };
  const target = new URL('/v1/execute', url);

  const latencies = [];
  const errorSamples = [];
  let errors = 0;
  let lastEnd = 0;
  let cpuBefore;
  const started = performance.now();
  const measureFrom = started + warmupSeconds * 1000;
  const stopAt = measureFrom + seconds * 1000;
  const cpuTimer = setTimeout(() => (cpuBefore = cpuSnapshot(cpuGroups)), warmupSeconds * 1000);

  process.stdout.write(
    `${label}: ${warmupSeconds} s warm-up + ${seconds} s, ${concurrency} clients ... `,
  );
  async function client() {
    while (performance.now() < stopAt) {
      const start = performance.now();
      const res = await request(target, options);
      const end = performance.now();
      if (start < measureFrom) continue;
      lastEnd = Math.max(lastEnd, end);
      if (isGoodResult(res)) {
        latencies.push(end - start);
      } else {
        errors++;
        if (errorSamples.length < 5)
          errorSamples.push(`HTTP ${res.status}: ${res.body.slice(0, 300)}`);
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, client));
  clearTimeout(cpuTimer);
  const cpu = cpuBefore ? cpuPercent(cpuBefore, cpuSnapshot(cpuGroups)) : {};
  agent.destroy();

  latencies.sort((a, b) => a - b);
  // Requests still in flight at stopAt are waited for: divide by the time until the last one ended.
  const elapsed = (Math.max(lastEnd, stopAt) - measureFrom) / 1000;
  const result = {
    label,
    requests: latencies.length,
    rps: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p90: percentile(latencies, 90),
    p99: percentile(latencies, 99),
    errors,
    errorSamples,
    cpu,
  };
  console.log(`${Math.round(result.rps)} req/s, ${errors} errors`);
  return result;
}

// ---------------------------------------------------------------------------------------------
// Report

const ms = (v) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a');

function report(direct, skeleton, sluice, loadAtStart) {
  const row = (r) =>
    `| ${r.label} | ${r.requests} | ${Math.round(r.rps)} | ${ms(r.p50)} | ${ms(r.p90)} | ${ms(r.p99)} | ${r.errors} |`;
  const ratio = sluice.rps / direct.rps;
  const addedP50 = sluice.p50 - direct.p50;
  const ratioMet = ratio >= GOAL_THROUGHPUT_RATIO;
  const rpsMet = sluice.rps >= GOAL_RPS;
  const perRequest = (r) =>
    Object.entries(r.cpu)
      .filter(([k]) => !k.startsWith('machine') && !k.startsWith('other'))
      .map(([k, v]) => `${k} ${(((v / 100) * 1000) / r.rps).toFixed(2)}`)
      .join(', ');
  const cpuLine = (r) =>
    Object.entries(r.cpu)
      .map(([k, v]) => `${k} ${Math.round(v)}%`)
      .join(', ');

  const out = [
    `### Small queries — ${new Date().toISOString()}`,
    '',
    `- Machine: ${machineDescription()}`,
    `- Load average at start: ${loadAtStart}; at end: ${loadAverage()}`,
    `- Code: ${gitDescription()}`,
    `- Load: ${SETTINGS.concurrency} keep-alive clients (node:http), closed loop, ${SETTINGS.seconds} s after ${SETTINGS.warmupSeconds} s warm-up, ` +
      `the direct server in a process of its own`,
    `- Statement: \`${SETTINGS.statement}\` (JSON body, default format)`,
    '',
    '| target | requests | req/s | p50 ms | p90 ms | p99 ms | errors |',
    '|---|---:|---:|---:|---:|---:|---:|',
    row(direct),
    row(skeleton),
    row(sluice),
    '',
    `- Sluice throughput: **${Math.round(sluice.rps)} req/s** (goal ≥ ${GOAL_RPS}: ${rpsMet ? 'met' : 'NOT met'})`,
    `- Throughput Sluice/direct: **${ratio.toFixed(2)}×** (next goal ≥ ${GOAL_THROUGHPUT_RATIO}×: ${ratioMet ? 'met' : 'NOT met'})`,
    `- Added p50 latency: **${ms(addedP50)} ms**`,
    `- Sluice/skeleton (the architecture's own floor: the same hops, none of Sluice's work): ` +
      `**${(sluice.rps / skeleton.rps).toFixed(2)}×**; skeleton/direct: ${(skeleton.rps / direct.rps).toFixed(2)}×`,
    '',
    'CPU during the measured window (100% = one core):',
    '',
    `- direct: ${cpuLine(direct)}`,
    `- skeleton: ${cpuLine(skeleton)}`,
    `- Sluice: ${cpuLine(sluice)}`,
    '',
    'CPU per request (ms), by process:',
    '',
    `- skeleton: ${perRequest(skeleton)}`,
    `- Sluice: ${perRequest(sluice)}`,
  ];
  for (const r of [direct, skeleton, sluice]) {
    if (r.errorSamples.length > 0) {
      out.push('', `First errors (${r.label}):`, ...r.errorSamples.map((s) => `    ${s}`));
    }
  }
  console.log(`\n${out.join('\n')}\n`);
}

// ---------------------------------------------------------------------------------------------

/** What a child prints once it is ready (the URL after `prefix`, if any). */
async function printed(child, prefix) {
  for (const deadline = Date.now() + START_TIMEOUT_MS; Date.now() < deadline;) {
    const line = child.lines.find((l) => l.startsWith(prefix));
    if (line) return line.slice(prefix.length).trim();
    await Promise.race([sleep(50), child.died]);
  }
  throw new Error(`${child.name} did not start`);
}

/** The architecture's floor (bench/skeleton-baseline.mjs): its worker, then its api. */
async function measureSkeleton(external) {
  const id = `bench-skeleton-${randomBytes(6).toString('hex')}`;
  const env = {
    ...process.env,
    BENCH_DATABASE_URL: SETTINGS.databaseUrl,
    BENCH_REDIS_URL: SETTINGS.redisUrl,
    BENCH_SKELETON_PREFIX: `{${id}}`,
  };
  onCleanup(() => deleteRedisKeys(id, SETTINGS.redisUrl));
  const file = 'bench/skeleton-baseline.mjs';
  const worker = startChild('skeleton worker', file, { ...env, BENCH_SKELETON_ROLE: 'worker' });
  onCleanup(worker.stop);
  await printed(worker, 'skeleton worker ready');
  const api = startChild('skeleton api', file, { ...env, BENCH_SKELETON_ROLE: 'api' });
  onCleanup(api.stop);
  const url = await printed(api, 'skeleton api on ');
  const result = await Promise.race([
    runLoad({
      label: 'skeleton (node:http → BullMQ → piscina → pg → Redis stream)',
      url,
      cpuGroups: {
        'bench client': [process.pid],
        api: [api.pid],
        worker: [worker.pid],
        ...external,
      },
    }),
    worker.died,
    api.died,
  ]);
  await api.stop();
  await worker.stop();
  return result;
}

async function main() {
  const loadAtStart = loadAverage();
  const warning = staleBuildWarning();
  if (warning) console.error(warning);
  // Shared services, looked up by process name (other users of them show up here too).
  const external = { postgres: 'postgres', redis: 'redis-server' };

  // The floor first, in a process of its own, stopped before Sluice starts so they never overlap.
  const directServer = startChild('direct baseline', 'bench/direct-baseline.mjs', {
    ...process.env,
    BENCH_DATABASE_URL: SETTINGS.databaseUrl,
    BENCH_DIRECT_POOL_SIZE: '16',
  });
  onCleanup(directServer.stop);
  const url = await printed(directServer, 'direct baseline on ');
  const direct = await runLoad({
    label: 'direct (node:http + pg)',
    url,
    cpuGroups: { 'bench client': [process.pid], 'direct server': [directServer.pid], ...external },
  });
  await directServer.stop();
  const skeleton = await measureSkeleton(external);

  // One user sends every request: lift the per-user admission cap (default 16) above the load.
  const sluice = await startSluice({
    isGood: isGoodResult,
    env: { SLUICE_MAX_ACTIVE_PER_USER: String(Math.max(16, 2 * SETTINGS.concurrency)) },
  });
  const run = runLoad({
    label: 'Sluice (api + worker)',
    url: sluice.baseUrl,
    headers: sluice.headers,
    cpuGroups: {
      'bench client': [process.pid],
      api: [sluice.api.pid],
      worker: [sluice.worker.pid],
      ...external,
    },
  });
  const result = await Promise.race([run, ...sluice.children.map((c) => c.died)]);
  if (result.errors > 0) {
    console.error('\nlast output of the Sluice processes:');
    for (const c of sluice.children)
      console.error(`  [${c.name}]\n    ${c.lines.slice(-15).join('\n    ')}`);
  }
  report(direct, skeleton, result, loadAtStart);
}

await runMain(main);
