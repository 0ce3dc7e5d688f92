// System calls per small query, by process and thread: Sluice's worker and api, and the
// skeleton's (bench/skeleton-baseline.mjs), each traced with strace while BENCH_REQUESTS requests
// are answered under the small-query load (32 keep-alive clients, after BENCH_WARM_UP requests).
// On a VM a system call is dear (a loopback send does the receiver's wake-up; an empty poll is a
// turn of the event loop), and a count does not move with what else the machine runs, as times
// do. strace slows the traced process: the counts compare, the rates do not.
//
//   npm run build && node bench/syscalls.mjs              (about 2 minutes; needs strace)
//
// BENCH_REQUESTS (default 2000), BENCH_WARM_UP (4000), BENCH_CONCURRENCY (32);
// BENCH_TARGETS=sluice (or skeleton): only that one.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  envInt,
  installGuards,
  onCleanup,
  runMain,
  skeletonEnv,
  startChild,
  startSluice,
  SMALL_STATEMENT,
} from './lib/service.mjs';

const REQUESTS = envInt('BENCH_REQUESTS', 2000);
const WARM_UP = envInt('BENCH_WARM_UP', 4000);
const CONCURRENCY = envInt('BENCH_CONCURRENCY', 32);
const TARGETS = (process.env.BENCH_TARGETS ?? 'skeleton,sluice').split(',').map((t) => t.trim());
const STATEMENT = SMALL_STATEMENT;
installGuards(10 * 60_000);

/** `n` requests, CONCURRENCY at a time, each client in a closed loop; how many failed. */
async function load(url, headers, n) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const body = Buffer.from(JSON.stringify({ statement: STATEMENT }));
  const options = {
    method: 'POST',
    agent,
    headers: { ...headers, 'content-type': 'application/json', 'content-length': body.length },
  };
  let left = n;
  let failed = 0;
  const one = () =>
    new Promise((resolve) => {
      const req = http.request(url, options, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode !== 200) failed++;
          resolve();
        });
      });
      req.on('error', () => {
        failed++;
        resolve();
      });
      req.end(body);
    });
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (left-- > 0) await one();
    }),
  );
  agent.destroy();
  return failed;
}

/**
 * Each thread of `pid` traced while `work` runs: per thread (main thread first, then by system
 * calls), its calls per request by name. Threads under 0.05 a request are left out.
 */
async function traced(pid, work) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-syscalls-'));
  onCleanup(() => fs.rmSync(dir, { recursive: true, force: true }));
  const tids = fs.readdirSync(`/proc/${pid}/task`);
  const strace = spawn('strace', ['-qq', '-ff', '-o', `${dir}/t`, ...tids.flatMap((t) => ['-p', t])], {
    stdio: 'ignore',
  });
  onCleanup(() => strace.kill('SIGKILL'));
  // strace attaches thread by thread.
  await sleep(1500);
  const failed = await work();
  strace.kill('SIGINT');
  await new Promise((resolve) => strace.once('exit', resolve));
  const threads = [];
  for (const file of fs.readdirSync(dir)) {
    const tid = Number(file.split('.')[1]);
    const calls = new Map();
    for (const line of fs.readFileSync(path.join(dir, file), 'utf8').split('\n')) {
      const name = /^(\w+)\(/.exec(line)?.[1];
      if (name) calls.set(name, (calls.get(name) ?? 0) + 1);
    }
    const total = [...calls.values()].reduce((a, b) => a + b, 0) / REQUESTS;
    if (total >= 0.05) threads.push({ main: tid === pid, total, calls });
  }
  threads.sort((a, b) => Number(b.main) - Number(a.main) || b.total - a.total);
  return { threads, failed };
}

function report(label, { threads, failed }) {
  const all = threads.reduce((sum, t) => sum + t.total, 0);
  console.log(`\n${label}: ${all.toFixed(2)} system calls a request (${failed} requests failed)`);
  console.log('| thread | calls a request | by name |');
  console.log('|---|---:|---|');
  threads.forEach((t, i) => {
    const names = [...t.calls]
      .sort((a, b) => b[1] - a[1])
      .filter(([, n]) => n / REQUESTS >= 0.01)
      .map(([name, n]) => `${name} ${(n / REQUESTS).toFixed(2)}`)
      .join(', ');
    console.log(`| ${t.main ? 'main' : `other ${i}`} | ${t.total.toFixed(2)} | ${names} |`);
  });
}

async function sluice() {
  const started = await startSluice({
    adminUser: `bench_syscalls_${randomBytes(3).toString('hex')}`,
    env: { SLUICE_MAX_ACTIVE_PER_USER: String(CONCURRENCY * 2) },
  });
  const url = `${started.baseUrl}/v1/execute`;
  await load(url, started.headers, WARM_UP);
  for (const [label, child] of [
    ['Sluice worker', started.worker],
    ['Sluice api', started.api],
  ]) {
    report(label, await traced(child.pid, () => load(url, started.headers, REQUESTS)));
  }
}

async function skeleton() {
  const env = skeletonEnv();
  const worker = startChild('skeleton worker', 'bench/skeleton-baseline.mjs', {
    ...env,
    BENCH_SKELETON_ROLE: 'worker',
  });
  onCleanup(worker.stop);
  const api = startChild('skeleton api', 'bench/skeleton-baseline.mjs', {
    ...env,
    BENCH_SKELETON_ROLE: 'api',
  });
  onCleanup(api.stop);
  let base;
  for (const deadline = Date.now() + 30_000; !base; await sleep(100)) {
    if (Date.now() > deadline) throw new Error('the skeleton did not start');
    const ready = worker.lines.some((l) => l.startsWith('skeleton worker ready'));
    base = ready && api.lines.join('\n').match(/http:\/\/127\.0\.0\.1:\d+/)?.[0];
  }
  const url = `${base}/v1/execute`;
  await load(url, {}, WARM_UP);
  report('skeleton worker', await traced(worker.pid, () => load(url, {}, REQUESTS)));
  report('skeleton api', await traced(api.pid, () => load(url, {}, REQUESTS)));
}

await runMain(async () => {
  if (spawnSync('strace', ['-V']).status !== 0) throw new Error('strace is not installed');
  console.log(
    `### System calls a small query (${REQUESTS} requests after ${WARM_UP}, ${CONCURRENCY} clients) — ${new Date().toISOString()}`,
  );
  if (TARGETS.includes('skeleton')) await skeleton();
  if (TARGETS.includes('sluice')) await sluice();
});
