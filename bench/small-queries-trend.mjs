// One Sluice under the small-query load of small-queries.mjs, measured in back-to-back windows:
// throughput, CPU per request of each process, write system calls and context switches per
// request and RSS, window by window. Shows whether Sluice gets faster as it warms up or slower the
// longer it serves (a cost that grows per statement once made a worker lose 10% a minute). Run by
// hand:
//
//   npm run build && node bench/small-queries-trend.mjs
//
// BENCH_IDEMPOTENCY_KEYS=1 sends every request with an Idempotency-Key of its own (every result
// kept). BENCH_RATE=<n> starts at most n requests a second, all clients together: below what the
// service can serve, two builds then serve the same load, and their CPU per request compares
// without the throughput (which a shared machine's other work moves) changing it. Needs PostgreSQL and Redis on loopback. Bounded in time; stops its processes and removes its
// Redis keys at the end, also on error.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import {
  cpuPercent,
  cpuSnapshot,
  envInt,
  installGuards,
  isOkJson,
  mb,
  ms,
  request,
  rssBytes,
  runMain,
  sluiceCpuGroups,
  staleBuildWarning,
  startSluice,
  switchCounts,
  writeCounts,
  SMALL_STATEMENT,
} from './lib/service.mjs';

const WINDOWS = envInt('BENCH_WINDOWS', 9);
const WINDOW_SECONDS = envInt('BENCH_WINDOW_SECONDS', 10);
const CONCURRENCY = envInt('BENCH_CONCURRENCY', 32);
const STATEMENT = SMALL_STATEMENT;
// 1: every request sends an Idempotency-Key of its own, so that every result is kept.
const KEPT = envInt('BENCH_IDEMPOTENCY_KEYS', 0) === 1;
const PROCESSES = ['api', 'worker', 'postgres', 'redis'];
// 0: each client sends its next request as soon as its last one is answered.
const RATE = process.env.BENCH_RATE ? envInt('BENCH_RATE', 0) : 0;

installGuards((WINDOWS * WINDOW_SECONDS + 120) * 1000);

await runMain(async () => {
  const stale = staleBuildWarning();
  if (stale) console.warn(stale);
  // One user sends everything: its cap on active queries must not be what is measured. Every
  // other setting is the default, the user's share of a worker's slots included.
  const sluice = await startSluice({
    env: { SLUICE_MAX_ACTIVE_PER_USER: String(CONCURRENCY * 2) },
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const body = Buffer.from(JSON.stringify({ statement: STATEMENT }));
  const options = {
    method: 'POST',
    agent,
    body,
    headers: {
      'content-type': 'application/json',
      'content-length': body.length,
      ...sluice.headers,
    },
  };
  const url = new URL('/v1/execute', sluice.baseUrl);
  let done = 0;
  let errors = 0;
  let stop = false;
  let next = performance.now();
  /** Waits for the next request's turn at BENCH_RATE (no burst to catch up more than 100 ms). */
  const turn = async () => {
    if (!RATE) return;
    const now = performance.now();
    next = Math.max(next + 1000 / RATE, now - 100);
    if (next > now) await new Promise((resolve) => setTimeout(resolve, next - now));
  };
  const client = async () => {
    while (!stop) {
      await turn();
      const sent = KEPT
        ? { ...options, headers: { ...options.headers, 'idempotency-key': randomUUID() } }
        : options;
      const res = await request(url, sent);
      if (isOkJson(res, 10)) done++;
      else if (errors++ === 0) {
        console.error(
          `first error: ${res.status} ${String(res.body ?? res.error ?? '').slice(0, 300)}`,
        );
      }
    }
  };
  const clients = Array.from({ length: CONCURRENCY }, client);
  const groups = sluiceCpuGroups(sluice);

  console.log(
    `${CONCURRENCY} clients${RATE ? `, at most ${RATE} requests a second` : ''}, ` +
      `\`${STATEMENT}\`, ${WINDOWS} windows of ${WINDOW_SECONDS} s\n`,
  );
  console.log(
    `| window | req/s | ${PROCESSES.map((p) => `${p} CPU ms/req`).join(' | ')} | ` +
      'api / worker / redis writes/req | context switches/req, voluntary + involuntary: ' +
      `${PROCESSES.join(' / ')} | api / worker RSS MB | errors |`,
  );
  console.log(`|---|---:|${PROCESSES.map(() => '---:|').join('')}---|---|---|---:|`);
  for (let w = 1; w <= WINDOWS; w++) {
    const before = cpuSnapshot(groups);
    const from = done;
    await new Promise((resolve) => setTimeout(resolve, WINDOW_SECONDS * 1000));
    const after = cpuSnapshot(groups);
    const n = done - from;
    const cpu = cpuPercent(before, after);
    const writes = writeCounts(before, after);
    const seconds = (after.at - before.at) / 1000;
    // % of one core over the window, as ms of CPU per request.
    const perRequest = (p) => ms((cpu[p] * 10 * seconds) / n);
    const writesPer = ['api', 'worker', 'redis'].map((p) => (writes[p] / n).toFixed(1));
    const switches = switchCounts(before, after);
    const switchesPer = PROCESSES.map(
      (p) =>
        `${(switches[p].voluntary / n).toFixed(1)} + ${(switches[p].involuntary / n).toFixed(1)}`,
    );
    console.log(
      `| ${(w - 1) * WINDOW_SECONDS}–${w * WINDOW_SECONDS} s | ${Math.round(n / seconds)} | ` +
        `${PROCESSES.map(perRequest).join(' | ')} | ${writesPer.join(' / ')} | ` +
        `${switchesPer.join(' / ')} | ` +
        `${mb(rssBytes(sluice.api.pid))} / ${mb(rssBytes(sluice.worker.pid))} | ${errors} |`,
    );
  }
  stop = true;
  await Promise.all(clients);
  agent.destroy();
});
