// Small-query throughput and latency: Sluice (api + worker over Redis) against a direct node:http + pg
// endpoint, same machine, same statement, same load. Run by hand (never in CI):
//
//   npm run build && node bench/small-queries.mjs
//   BENCH_TRACING=1 node bench/small-queries.mjs   # also Sluice tracing every query to a local OTLP sink
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
  serverCounts,
  serverWork,
  writeCounts,
  deleteRedisKeys,
  envInt,
  gitDescription,
  installGuards,
  isOkJson,
  loadAverage,
  machineDescription,
  median,
  ms,
  onCleanup,
  percentile,
  printChildOutput,
  request,
  runMain,
  staleBuildWarning,
  START_TIMEOUT_MS,
  benchAdminRole,
  jsonRequest,
  startCountingProxy,
  login,
  startChild,
  startSluice,
} from './lib/service.mjs';

const SETTINGS = {
  databaseUrl: DATABASE_URL,
  redisUrl: REDIS_URL,
  seconds: envInt('BENCH_SECONDS', 10),
  warmupSeconds: envInt('BENCH_WARMUP_SECONDS', 2),
  // Each target's first load, not measured: Sluice's processes take seconds to tens of seconds
  // under load to reach their speed (on a slow 2-core VM: ≈190 req/s in the first 10 s, ≈350
  // from the fortieth; bench/small-queries-trend.mjs shows it window by window).
  targetWarmupSeconds: envInt('BENCH_TARGET_WARMUP_SECONDS', 40),
  concurrency: envInt('BENCH_CONCURRENCY', 32),
  requestTimeoutMs: 10_000,
  startTimeoutMs: START_TIMEOUT_MS,
  statement: 'select g, md5(g::text) from generate_series(1,10) g',
  expectedRows: 10,
  // Rounds of the three targets in turn: this machine's speed drifts by ±10% over minutes, so one
  // load each would compare targets measured at different speeds.
  rounds: envInt('BENCH_ROUNDS', 3),
  // Sluice's clients shared out between this many users (the skeleton knows no users): with more
  // than one, each user's share of a worker's slots is a limit while the others' queries wait.
  users: envInt('BENCH_USERS', 1),
  // A fourth target: the same Sluice with tracing on at 100% sampling, exporting OTLP/HTTP
  // (protobuf, the default) to a sink in this process that reads and drops every export.
  tracing: envInt('BENCH_TRACING', 0) === 1,
};
// Goals (issue 13): at least 2,400 req/s (3× the ≈770 it measured), then 0.25× the floor.
const GOAL_RPS = 2_400;
const GOAL_THROUGHPUT_RATIO = 0.25;
// Whatever happens (hung child, stuck socket), the bench ends by then.
const TARGETS = SETTINGS.tracing ? 4 : 3;
const HARD_LIMIT_MS =
  TARGETS * (SETTINGS.targetWarmupSeconds + 5) * 1000 +
  TARGETS * SETTINGS.rounds * (SETTINGS.warmupSeconds + SETTINGS.seconds + 5) * 1000 +
  TARGETS * SETTINGS.startTimeoutMs +
  30_000;
installGuards(HARD_LIMIT_MS);

/** A whole, successful result: every row there, and (Sluice) the final status says OK. */
const isGoodResult = (res) => isOkJson(res, SETTINGS.expectedRows);

// ---------------------------------------------------------------------------------------------
// Load: N keep-alive clients in a closed loop; only requests started after the warm-up count.

async function runLoad({
  label,
  url,
  headers = {},
  /** Headers of each client in turn (one user each), instead of `headers` for all. */
  clientHeaders,
  cpuGroups,
  warmupSeconds = SETTINGS.warmupSeconds,
  seconds = SETTINGS.seconds,
}) {
  const { concurrency } = SETTINGS;
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const body = Buffer.from(JSON.stringify({ statement: SETTINGS.statement }));
  const optionsOf = (i) => ({
    method: 'POST',
    agent,
    body,
    headers: {
      'content-type': 'application/json',
      'content-length': body.length,
      ...(clientHeaders ? clientHeaders[i % clientHeaders.length] : headers),
    },
  });
  const target = new URL('/v1/execute', url);

  const latencies = [];
  const errorSamples = [];
  let errors = 0;
  let lastEnd = 0;
  let cpuBefore;
  const started = performance.now();
  const measureFrom = started + warmupSeconds * 1000;
  const stopAt = measureFrom + seconds * 1000;
  let serversBefore;
  const cpuTimer = setTimeout(() => {
    cpuBefore = cpuSnapshot(cpuGroups);
    serversBefore = serverCounts();
  }, warmupSeconds * 1000);

  process.stdout.write(
    `${label}: ${warmupSeconds} s warm-up + ${seconds} s, ${concurrency} clients ... `,
  );
  async function client(_, i) {
    const options = optionsOf(i);
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
  const cpuAfter = cpuBefore ? cpuSnapshot(cpuGroups) : undefined;
  const cpu = cpuBefore ? cpuPercent(cpuBefore, cpuAfter) : {};
  const writes = cpuBefore ? writeCounts(cpuBefore, cpuAfter) : {};
  const servers =
    serversBefore && latencies.length > 0
      ? serverWork(await serversBefore, await serverCounts(), latencies.length + errors)
      : undefined;
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
    servers,
    // Write system calls per second of the same window, by process.
    writesPerSecond: Object.fromEntries(
      Object.entries(writes).map(([k, n]) => [k, n / ((cpuAfter.at - cpuBefore.at) / 1000)]),
    ),
  };
  console.log(`${Math.round(result.rps)} req/s, ${errors} errors`);
  return result;
}

// ---------------------------------------------------------------------------------------------
// Report

/** The round whose throughput is the median of a target's rounds. */
function medianRound(rounds) {
  const sorted = [...rounds].sort((a, b) => a.rps - b.rps);
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

function report(rounds, loadAtStart, trips) {
  const row = (r, round) =>
    `| ${r.label} | ${round} | ${r.requests} | ${Math.round(r.rps)} | ${ms(r.p50)} | ${ms(r.p90)} | ${ms(r.p99)} | ${r.errors} |`;
  const direct = medianRound(rounds.map((r) => r.direct));
  const skeleton = medianRound(rounds.map((r) => r.skeleton));
  const sluice = medianRound(rounds.map((r) => r.sluice));
  // Ratios within each round (targets measured minutes apart at most), then their median.
  const ratio = median(rounds.map((r) => r.sluice.rps / r.direct.rps));
  const ofSkeleton = median(rounds.map((r) => r.sluice.rps / r.skeleton.rps));
  const skeletonRatio = median(rounds.map((r) => r.skeleton.rps / r.direct.rps));
  const addedP50 = sluice.p50 - direct.p50;
  const ratioMet = ratio >= GOAL_THROUGHPUT_RATIO;
  const rpsMet = sluice.rps >= GOAL_RPS;
  const perRequest = (r) =>
    Object.entries(r.cpu)
      .filter(([k]) => !k.startsWith('machine') && !k.startsWith('other'))
      .map(([k, v]) => `${k} ${(((v / 100) * 1000) / r.rps).toFixed(2)}`)
      .join(', ');
  const writesPerRequest = (r) =>
    Object.entries(r.writesPerSecond ?? {})
      .filter(([k]) => k !== 'postgres')
      .map(([k, v]) => `${k} ${(v / r.rps).toFixed(1)}`)
      .join(', ');
  const cpuLine = (r) =>
    Object.entries(r.cpu)
      .map(([k, v]) => `${k} ${Math.round(v)}%`)
      .join(', ');
  const serversLine = (r) =>
    r.servers
      ? `${r.servers.redisCommands.toFixed(1)} (${r.servers.redisScripts.toFixed(1)} script calls; ${r.servers.top})`
      : 'not counted';
  const traced = rounds[0].traced ? medianRound(rounds.map((r) => r.traced)) : undefined;
  // CPU per request, unlike throughput, holds still on a machine that others load.
  const all = { direct, skeleton, Sluice: sluice, ...(traced ? { 'Sluice traced': traced } : {}) };
  const measured = { skeleton, Sluice: sluice, ...(traced ? { 'Sluice traced': traced } : {}) };
  /** A titled list: one line per target. */
  const section = (title, line, targets) => [
    title,
    '',
    ...Object.entries(targets).map(([name, r]) => `- ${name}: ${line(r)}`),
    '',
  ];
  const perRound = (pick) => rounds.map((r) => `${(pick(r) ?? NaN).toFixed(2)}×`).join(', ');

  const out = [
    `### Small queries — ${new Date().toISOString()}`,
    '',
    `- Machine: ${machineDescription()}`,
    `- Load average at start: ${loadAtStart}; at end: ${loadAverage()}`,
    `- Code: ${gitDescription()}`,
    `- Load: ${SETTINGS.concurrency} keep-alive clients (node:http), closed loop, ${SETTINGS.seconds} s after ${SETTINGS.warmupSeconds} s warm-up, ` +
      `${SETTINGS.rounds} rounds of the three targets in turn after a first load of ${SETTINGS.targetWarmupSeconds} s each, ` +
      'each target in processes of its own (the others idle meanwhile)',
    `- Statement: \`${SETTINGS.statement}\` (JSON body, default format); Sluice's clients as ${SETTINGS.users} user${SETTINGS.users > 1 ? 's' : ''}`,
    '',
    '| target | round | requests | req/s | p50 ms | p90 ms | p99 ms | errors |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    ...rounds.flatMap((r, i) => [
      row(r.direct, i + 1),
      row(r.skeleton, i + 1),
      row(r.sluice, i + 1),
      ...(r.traced ? [row(r.traced, i + 1)] : []),
    ]),
    '',
    ...(rounds[0].traced
      ? [
          `- Tracing on (100% sampled, OTLP/HTTP protobuf to a local sink; ${sink.requests} exports, ${(sink.bytes / 1e6).toFixed(1)} MB): ` +
            `Sluice traced/untraced **${median(rounds.map((r) => r.traced.rps / r.sluice.rps)).toFixed(2)}×** (median of the rounds' ratios), ` +
            `by round: ${perRound((r) => r.traced.rps / r.sluice.rps)}; p50 ${ms(medianRound(rounds.map((r) => r.traced)).p50)} ms, p99 ${ms(medianRound(rounds.map((r) => r.traced)).p99)} ms (median round)`,
          '',
        ]
      : []),
    `- Sluice throughput (median round): **${Math.round(sluice.rps)} req/s** (goal ≥ ${GOAL_RPS}: ${rpsMet ? 'met' : 'NOT met'})`,
    `- Throughput Sluice/direct (median of the rounds' ratios): **${ratio.toFixed(2)}×** (next goal ≥ ${GOAL_THROUGHPUT_RATIO}×: ${ratioMet ? 'met' : 'NOT met'}); by round: ${perRound((r) => r.sluice.rps / r.direct.rps)}`,
    `- Added p50 latency (median rounds): **${ms(addedP50)} ms**`,
    `- Sluice/skeleton (the architecture's own floor: the same hops, none of Sluice's work): ` +
      `**${ofSkeleton.toFixed(2)}×**, by round: ${perRound((r) => r.sluice.rps / r.skeleton.rps)}; skeleton/direct: ${skeletonRatio.toFixed(2)}×`,
    '',
    ...section('CPU during the median round of each target (100% = one core):', cpuLine, all),
    ...section('CPU per request (ms), by process:', perRequest, measured),
    // On a VM a socket write that wakes another process costs far more than the bytes it moves.
    ...section(
      'Write system calls per request (write/writev, by process; PostgreSQL sends with send(), not counted):',
      writesPerRequest,
      all,
    ),
    ...section(
      'Redis commands per request (INFO commandstats, commands inside scripts included):',
      serversLine,
      measured,
    ),
    `PostgreSQL round trips per request (what clients sent, counted by a TCP proxy in front of PostgreSQL, ` +
      `${TRIPS_COUNTED} requests one at a time after ${TRIPS_WARMUP}, every process of the target together; ` +
      'a phase of its own after the rounds):',
    '',
    ...Object.entries(trips).map(([name, n]) => `- ${name}: ${n.toFixed(2)}`),
  ];
  for (const r of rounds.flatMap((round) =>
    [round.direct, round.skeleton, round.sluice, round.traced].filter(Boolean),
  )) {
    if (r.errorSamples.length > 0) {
      out.push('', `First errors (${r.label}):`, ...r.errorSamples.map((e) => `    ${e}`));
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
async function startSkeleton(databaseUrl = SETTINGS.databaseUrl) {
  const id = `bench-skeleton-${randomBytes(6).toString('hex')}`;
  const env = {
    ...process.env,
    BENCH_DATABASE_URL: databaseUrl,
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
  return { url, worker, api, children: [worker, api] };
}

/**
 * `n` users of the bench's role, made through the admin API (and deleted at the end): the headers
 * of each, signed in.
 */
async function benchUsers(sluice, n) {
  const role = await benchAdminRole(SETTINGS.databaseUrl);
  const suffix = randomBytes(4).toString('hex');
  const headers = [];
  for (let i = 0; i < n; i++) {
    const username = `bench_u${i}_${suffix}`;
    const password = randomBytes(12).toString('base64url');
    const made = await jsonRequest(
      new URL('/v1/users', sluice.baseUrl),
      { username, password, role },
      sluice.headers,
    );
    if (made.status !== 201) throw new Error(`POST /v1/users: ${made.status} ${made.body}`);
    onCleanup(() =>
      request(new URL(`/v1/users/${username}`, sluice.baseUrl), {
        method: 'DELETE',
        headers: sluice.headers,
      }),
    );
    headers.push(await login(sluice.baseUrl, username, password));
  }
  return headers;
}

/** Sequential requests of the round-trip count: the first ones warm the pools, uncounted. */
const TRIPS_WARMUP = 50;
const TRIPS_COUNTED = 300;

/**
 * PostgreSQL round trips per request, every process's together: `TRIPS_COUNTED` requests one after
 * another to a deployment of the target whose DATABASE_URL is a counting proxy (a phase of its
 * own, after the timed rounds: the proxy's hop costs time).
 */
async function roundTrips(start) {
  const proxy = await startCountingProxy(SETTINGS.databaseUrl);
  const { url, headers, children } = await start(proxy.url);
  const body = Buffer.from(JSON.stringify({ statement: SETTINGS.statement }));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const send = async () => {
    const res = await request(new URL('/v1/execute', url), {
      method: 'POST',
      agent,
      body,
      headers: { 'content-type': 'application/json', 'content-length': body.length, ...headers },
    });
    if (!isGoodResult(res)) throw new Error(`round-trip count: HTTP ${res.status} ${res.body}`);
  };
  try {
    for (let i = 0; i < TRIPS_WARMUP; i++) await send();
    // Whatever runs on a timer (the worker's checks, the api's) settles first.
    await sleep(500);
    const before = proxy.sent();
    for (let i = 0; i < TRIPS_COUNTED; i++) await send();
    return (proxy.sent() - before) / TRIPS_COUNTED;
  } finally {
    agent.destroy();
    await Promise.all(children.map((c) => c.stop()));
    await proxy.stop();
  }
}

/** What the OTLP sink has been sent. */
const sink = { requests: 0, bytes: 0 };

/** An OTLP/HTTP receiver that reads each export and drops it: the collector's cheapest stand-in. */
async function startSink() {
  const server = http.createServer((req, res) => {
    req.on('data', (chunk) => (sink.bytes += chunk.length));
    req.on('end', () => {
      sink.requests += 1;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(() => new Promise((resolve) => server.close(resolve)));
  return `http://127.0.0.1:${server.address().port}`;
}

/** Runs a load, or rejects as soon as one of the target's processes dies. */
function loadUnlessDied(children, load) {
  return Promise.race([runLoad(load), ...children.map((c) => c.died)]);
}

async function main() {
  const loadAtStart = loadAverage();
  const warning = staleBuildWarning();
  if (warning) console.error(warning);
  // Shared services, looked up by process name (other users of them show up here too).
  const external = { postgres: 'postgres', redis: 'redis-server' };

  // Each target in processes of its own, all started first; only one is loaded at a time.
  const directServer = startChild('direct baseline', 'bench/direct-baseline.mjs', {
    ...process.env,
    BENCH_DATABASE_URL: SETTINGS.databaseUrl,
    BENCH_DIRECT_POOL_SIZE: '16',
  });
  onCleanup(directServer.stop);
  const directUrl = await printed(directServer, 'direct baseline on ');
  const skeleton = await startSkeleton();
  // One user sends every request: lift the per-user admission cap (default 16) above the load.
  // Every other setting is the default, the user's share of a worker's slots included.
  const sluice = await startSluice({
    isGood: isGoodResult,
    // With tracing compared, admins of their own: another run's start of the admin `bench` on the
    // same metadata database changes its password, and this run's token with it.
    ...(SETTINGS.tracing ? { adminUser: `bench_${randomBytes(3).toString('hex')}` } : {}),
    env: { SLUICE_MAX_ACTIVE_PER_USER: String(Math.max(16, 2 * SETTINGS.concurrency)) },
  });
  const clientHeaders = SETTINGS.users > 1 ? await benchUsers(sluice, SETTINGS.users) : undefined;
  const traced = SETTINGS.tracing
    ? await startSluice({
        isGood: isGoodResult,
        // Its own admin: a second start of the same one would change its password, and the first
        // Sluice's token with it.
        adminUser: `bench_traced_${randomBytes(3).toString('hex')}`,
        env: {
          SLUICE_MAX_ACTIVE_PER_USER: String(Math.max(16, 2 * SETTINGS.concurrency)),
          OTEL_EXPORTER_OTLP_ENDPOINT: await startSink(),
          OTEL_TRACES_SAMPLER: 'always_on',
        },
      })
    : undefined;
  const client = { 'bench client': [process.pid] };
  const targets = {
    direct: {
      children: [directServer],
      load: {
        label: 'direct (node:http + pg)',
        url: directUrl,
        cpuGroups: { ...client, 'direct server': [directServer.pid], ...external },
      },
    },
    skeleton: {
      children: skeleton.children,
      load: {
        label: 'skeleton (node:http → BullMQ → piscina → pg → Redis stream)',
        url: skeleton.url,
        cpuGroups: {
          ...client,
          api: [skeleton.api.pid],
          worker: [skeleton.worker.pid],
          ...external,
        },
      },
    },
    sluice: {
      children: sluice.children,
      load: {
        label: 'Sluice (api + worker)',
        url: sluice.baseUrl,
        headers: sluice.headers,
        clientHeaders,
        cpuGroups: { ...client, api: [sluice.api.pid], worker: [sluice.worker.pid], ...external },
      },
    },
    ...(traced
      ? {
          traced: {
            children: traced.children,
            load: {
              label: 'Sluice traced (100%, OTLP to a local sink)',
              url: traced.baseUrl,
              headers: traced.headers,
              cpuGroups: {
                ...client,
                api: [traced.api.pid],
                worker: [traced.worker.pid],
                ...external,
              },
            },
          },
        }
      : {}),
  };
  for (const { children, load } of Object.values(targets)) {
    process.stdout.write('warm-up, not measured: ');
    await loadUnlessDied(children, {
      ...load,
      warmupSeconds: SETTINGS.targetWarmupSeconds,
      seconds: 1,
    });
  }

  const rounds = [];
  for (let round = 1; round <= SETTINGS.rounds; round += 1) {
    console.log(`round ${round} of ${SETTINGS.rounds}`);
    const direct = await loadUnlessDied(targets.direct.children, targets.direct.load);
    const skeletonResult = await loadUnlessDied(targets.skeleton.children, targets.skeleton.load);
    const sluiceResult = await loadUnlessDied(targets.sluice.children, targets.sluice.load);
    if (sluiceResult.errors > 0) printChildOutput(sluice);
    const tracedResult = traced
      ? await loadUnlessDied(targets.traced.children, targets.traced.load)
      : undefined;
    if (tracedResult?.errors) printChildOutput(traced);
    rounds.push({ direct, skeleton: skeletonResult, sluice: sluiceResult, traced: tracedResult });
  }
  await Promise.all(
    [...targets.skeleton.children, ...targets.sluice.children, ...(traced?.children ?? [])].map(
      (c) => c.stop(),
    ),
  );
  console.log('PostgreSQL round trips per request (a counting proxy, requests one at a time) ...');
  const trips = {
    skeleton: await roundTrips(async (databaseUrl) => {
      const started = await startSkeleton(databaseUrl);
      return { ...started, headers: {} };
    }),
    Sluice: await roundTrips(async (databaseUrl) => {
      const started = await startSluice({
        databaseUrl,
        isGood: isGoodResult,
        env: { SLUICE_MAX_ACTIVE_PER_USER: String(Math.max(16, 2 * SETTINGS.concurrency)) },
      });
      return { url: started.baseUrl, headers: started.headers, children: started.children };
    }),
  };
  report(rounds, loadAtStart, trips);
}

await runMain(main);
