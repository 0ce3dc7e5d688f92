// What the hop from a worker's main thread to its pool thread costs a small query, measured on
// the architecture's skeleton (bench/skeleton-baseline.mjs) rather than on Sluice: the skeleton as
// small-queries.mjs runs it (one BullMQ worker on the main thread hands each job to a piscina
// thread) against two variants (BENCH_SKELETON_CONSUMER): `port`, the same hand-off by a plain
// MessagePort message to threads of its own, no piscina; `thread`, each of the same threads
// consumes the queue with a BullMQ worker of its own and runs the job itself. Same api, same
// statement, same load; the three are loaded in turn, the order reversed every other round, so
// that a shared machine's drift falls on all. Run by hand (never in CI):
//
//   node bench/skeleton-consumers.mjs            BENCH_ROUNDS=4 BENCH_SECONDS=10
//
// Needs PostgreSQL and Redis on loopback. Bounded in time; stops its processes and removes its
// Redis keys at the end, also on error.
import http from 'node:http';
import {
  cpuPercent,
  cpuSnapshot,
  envInt,
  installGuards,
  loadAverage,
  machineDescription,
  gitDescription,
  median,
  ms,
  percentile,
  request,
  runMain,
  startSkeleton,
  SMALL_STATEMENT,
} from './lib/service.mjs';

const ROUNDS = envInt('BENCH_ROUNDS', 4);
const SECONDS = envInt('BENCH_SECONDS', 10);
const WARM_UP_SECONDS = envInt('BENCH_WARMUP_SECONDS', 20);
const CONCURRENCY = envInt('BENCH_CONCURRENCY', 32);
const STATEMENT = SMALL_STATEMENT;
const VARIANTS = {
  pool: 'main thread → piscina thread (the floor small-queries.mjs measures)',
  port: 'main thread → thread by a MessagePort message (no piscina)',
  thread: 'each thread its own BullMQ worker (no piscina, nothing on the main thread)',
};
const NAMES = Object.keys(VARIANTS);
installGuards((NAMES.length * (WARM_UP_SECONDS + ROUNDS * (SECONDS + 5)) + 120) * 1000);

/** `seconds` of closed-loop load by CONCURRENCY clients: throughput, latency, CPU a request. */
async function load(target, seconds) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const body = Buffer.from(JSON.stringify({ statement: STATEMENT }));
  const options = {
    method: 'POST',
    agent,
    body,
    headers: { 'content-type': 'application/json', 'content-length': body.length },
  };
  const url = new URL('/v1/execute', target.url);
  const groups = {
    api: [target.api.pid],
    worker: [target.worker.pid],
    postgres: 'postgres',
    redis: 'redis-server',
  };
  const latencies = [];
  let errors = 0;
  const before = cpuSnapshot(groups);
  const stopAt = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < stopAt) {
        const began = performance.now();
        const res = await request(url, options);
        if (res.status === 200) latencies.push(performance.now() - began);
        else errors++;
      }
    }),
  );
  const cpu = cpuPercent(before, cpuSnapshot(groups));
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const rps = latencies.length / seconds;
  const perRequest = (label) => (cpu[label] / 100 / rps) * 1000;
  return {
    rps,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    errors,
    cpuMs: Object.fromEntries(Object.keys(groups).map((label) => [label, perRequest(label)])),
  };
}

async function main() {
  const loadAtStart = loadAverage();
  const targets = {};
  for (const name of NAMES)
    targets[name] = await startSkeleton({ consumer: name === 'pool' ? undefined : name });
  for (const [name, target] of Object.entries(targets)) {
    process.stdout.write(`warm-up, not measured: ${name} … `);
    console.log(`${Math.round((await load(target, WARM_UP_SECONDS)).rps)} req/s`);
  }
  const runs = Object.fromEntries(NAMES.map((name) => [name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const consumer of round % 2 === 0 ? NAMES : [...NAMES].reverse()) {
      const run = await load(targets[consumer], SECONDS);
      runs[consumer].push(run);
      console.log(
        `round ${round + 1}, ${consumer}: ${Math.round(run.rps)} req/s, ${run.errors} errors`,
      );
    }
  }
  const cpuCell = (run) =>
    Object.entries(run.cpuMs)
      .map(([label, v]) => `${label} ${v.toFixed(2)}`)
      .join(' / ');
  const rows = Object.entries(runs).map(([consumer, list]) => {
    const mid = [...list].sort((a, b) => a.rps - b.rps)[Math.floor(list.length / 2)];
    const rps = list.map((r) => Math.round(r.rps)).join(', ');
    return `| ${VARIANTS[consumer]} | ${rps} | ${Math.round(median(list.map((r) => r.rps)))} | ${ms(mid.p50)} | ${ms(mid.p99)} | ${cpuCell(mid)} |`;
  });
  const ratioOf = (name) => median(runs[name].map((r, i) => r.rps / runs.pool[i].rps));
  console.log(
    [
      '',
      `### Skeleton consumers — ${new Date().toISOString()}`,
      '',
      `- Machine: ${machineDescription()}`,
      `- Load average at start: ${loadAtStart}; at end: ${loadAverage()}`,
      `- Code: ${gitDescription()}`,
      `- Load: ${CONCURRENCY} keep-alive clients, closed loop, ${ROUNDS} rounds of ${SECONDS} s each way, alternated, after ${WARM_UP_SECONDS} s of warm-up each; \`${STATEMENT}\``,
      '',
      '| worker | req/s by round | median req/s | p50 ms | p99 ms | CPU a request (ms), median round |',
      '|---|---|---:|---:|---:|---|',
      ...rows,
      '',
      `- Throughput ÷ the floor's (median of the rounds' ratios): MessagePort **${ratioOf('port').toFixed(2)}×**, each thread its own consumer **${ratioOf('thread').toFixed(2)}×**`,
    ].join('\n'),
  );
}

await runMain(main);
