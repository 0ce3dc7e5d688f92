// Whether Sluice's processes hold more memory the more queries they serve: rounds of small
// queries through one api and one worker, and after each round, once the processes are idle,
// what a full garbage collection leaves in each isolate (the api's, the worker's main thread and
// each of its pool threads) next to the process's RSS. The floor is no growth at all: each
// isolate's live heap after the last round, against after the first. Run by hand (never in CI):
//
//   npm run build && node bench/memory-growth.mjs
//
// BENCH_ROUNDS (6) rounds of BENCH_REQUESTS (2500) requests from BENCH_CONCURRENCY (16) clients.
// Needs PostgreSQL and Redis on loopback; bounded in time; removes what it starts.
import http from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ROOT } from './lib/env.mjs';
import {
  envInt,
  executeOptions,
  gitDescription,
  installGuards,
  isOkJson,
  machineDescription,
  onCleanup,
  request,
  runMain,
  staleBuildWarning,
  startSluice,
  SMALL_STATEMENT,
} from './lib/service.mjs';

const SETTINGS = {
  rounds: envInt('BENCH_ROUNDS', 6),
  requests: envInt('BENCH_REQUESTS', 2500),
  concurrency: envInt('BENCH_CONCURRENCY', 16),
  statement: SMALL_STATEMENT,
};
/** The probes collect every this often: an idle pause of three periods gives each a fresh line. */
const PROBE_EVERY_MS = 2000;
const IDLE_MS = 3 * PROBE_EVERY_MS + 500;
installGuards(SETTINGS.rounds * (SETTINGS.requests * 50 + IDLE_MS) + 120_000);

const MB = (bytes) => (bytes / 1e6).toFixed(1);

/** The last line of each isolate in a process's probe file: { thread: { heap, rss } }. */
function lastProbes(dir, pid) {
  const latest = {};
  let text = '';
  try {
    text = readFileSync(path.join(dir, `${pid}.log`), 'utf8');
  } catch {
    return latest;
  }
  for (const line of text.trim().split('\n')) {
    const [, thread, heap, rss] = line.split(' ');
    latest[thread] = { heap: Number(heap), rss: Number(rss) };
  }
  return latest;
}

runMain(async () => {
  staleBuildWarning();
  const dir = mkdtempSync(path.join(tmpdir(), 'sluice-heap-'));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const sluice = await startSluice({
    env: {
      NODE_OPTIONS: `--expose-gc --import ${path.join(ROOT, 'bench/lib/heap-probe.mjs')}`,
      HEAP_PROBE_DIR: dir,
      HEAP_PROBE_EVERY_MS: String(PROBE_EVERY_MS),
      SLUICE_MAX_ACTIVE_PER_USER: String(SETTINGS.concurrency * 2),
    },
  });
  console.log(`# Memory growth — ${new Date().toISOString()}`);
  console.log(`- Machine: ${machineDescription()}`);
  console.log(`- Code: ${gitDescription()}`);
  console.log(
    `- ${SETTINGS.rounds} rounds of ${SETTINGS.requests} × \`${SETTINGS.statement}\`, ${SETTINGS.concurrency} clients; live heap after a full GC, idle\n`,
  );
  const agent = new http.Agent({ keepAlive: true, maxSockets: SETTINGS.concurrency });
  const target = new URL('/v1/execute', sluice.baseUrl);
  const options = executeOptions(sluice, SETTINGS.statement, agent);
  const processes = { api: sluice.api.pid, worker: sluice.worker.pid };
  const rows = [];
  let served = 0;
  for (let round = 1; round <= SETTINGS.rounds; round++) {
    let sent = 0;
    let failed = 0;
    await Promise.all(
      Array.from({ length: SETTINGS.concurrency }, async () => {
        while (sent < SETTINGS.requests) {
          sent++;
          if (!isOkJson(await request(target, options), 10)) failed++;
        }
      }),
    );
    served += sent;
    if (failed > 0) throw new Error(`round ${round}: ${failed} of ${sent} requests failed`);
    await sleep(IDLE_MS);
    const row = { round, served };
    for (const [name, pid] of Object.entries(processes)) {
      for (const [thread, probe] of Object.entries(lastProbes(dir, pid))) {
        row[`${name} ${thread}`] = probe.heap;
        row[`${name} rss`] = probe.rss;
      }
    }
    rows.push(row);
  }
  agent.destroy();
  const columns = Object.keys(rows[0])
    .filter((c) => c !== 'round' && c !== 'served')
    .sort();
  console.log(`| round | queries served | ${columns.map((c) => `${c} MB`).join(' | ')} |`);
  console.log(`|---|---|${columns.map(() => '---|').join('')}`);
  for (const row of rows) {
    console.log(
      `| ${row.round} | ${row.served} | ${columns.map((c) => MB(row[c] ?? 0)).join(' | ')} |`,
    );
  }
  const first = rows[0];
  const last = rows[rows.length - 1];
  console.log(`\nLive heap after round ${last.round} against round 1 (floor: 0):`);
  for (const c of columns.filter((c) => !c.endsWith('rss'))) {
    const grew = (last[c] ?? 0) - (first[c] ?? 0);
    console.log(
      `- ${c}: ${grew >= 0 ? '+' : ''}${MB(grew)} MB over ${last.served - first.served} queries`,
    );
  }
});
