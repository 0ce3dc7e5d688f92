// What one process costs a small query, counted in instructions rather than seconds: Sluice's api
// (or worker, BENCH_PROCESS=worker) and the skeleton's (bench/skeleton-baseline.mjs), each run
// under valgrind's callgrind beside the other process running normally, given the same load,
// instrumented only while BENCH_REQUESTS requests are answered after BENCH_WARM_UP ones.
// Instructions do not depend on what else the machine runs, as seconds do on a shared two-core
// machine: two builds can be told apart by a few percent (run it from each checkout). Counted:
// user-space instructions of every thread of the process (a worker's pool threads too; kernel
// time is not), split into V8's optimizing compilers (what a longer warm-up lowers), its garbage
// collectors, and the rest (the code that answers the requests).
//
//   npm run build && node bench/instructions.mjs                       (about 5 minutes; valgrind)
//   BENCH_PROCESS=worker node bench/instructions.mjs                   (about 10 minutes)
//
// BENCH_PROCESS: api (default) or worker; BENCH_REQUESTS (default 1000), BENCH_WARM_UP (3000),
// BENCH_CONCURRENCY (32), BENCH_NODE_ARGS: node flags of the processes under callgrind (e.g.
// --max-semi-space-size=32); BENCH_TARGETS=sluice (or skeleton): only that one.
// BENCH_KEEP_PROFILE=1 keeps callgrind's output (its directory is printed), to read with
// callgrind_annotate.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  ROOT,
  START_TIMEOUT_MS,
  envInt,
  freePort,
  installGuards,
  login,
  onCleanup,
  request,
  runMain,
  skeletonEnv,
  startChild,
  startSluice,
  SMALL_STATEMENT,
} from './lib/service.mjs';

const REQUESTS = envInt('BENCH_REQUESTS', 1000);
const WARM_UP = envInt('BENCH_WARM_UP', 3000);
const CONCURRENCY = envInt('BENCH_CONCURRENCY', 32);
const PROCESS = process.env.BENCH_PROCESS ?? 'api';
if (PROCESS !== 'api' && PROCESS !== 'worker') throw new Error('BENCH_PROCESS: api or worker');
const NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
const TARGETS = (process.env.BENCH_TARGETS ?? 'skeleton,sluice').split(',').map((t) => t.trim());
const KEEP_PROFILE = process.env.BENCH_KEEP_PROFILE === '1';
const STATEMENT = SMALL_STATEMENT;
installGuards(20 * 60 * 1000);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** callgrind_control finds its target by the HOST the target saw (the bench's env sets one). */
function control(pid, ...args) {
  return execFileSync('callgrind_control', [...args, String(pid)], {
    env: { ...process.env, HOST: '127.0.0.1' },
  }).toString();
}

/** A process under callgrind, not instrumented until asked; resolves once `ready` is truthy. */
async function callgrind(name, script, env, ready) {
  const out = path.join(fs.mkdtempSync(path.join(tmpdir(), 'sluice-callgrind-')), 'callgrind.out');
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      // V8 writes the code it runs: every such write must be seen.
      '--smc-check=all-non-file',
      `--callgrind-out-file=${out}`,
      process.execPath,
      ...NODE_ARGS,
      path.join(ROOT, script),
    ],
    // callgrind_control finds it by this HOST.
    { cwd: ROOT, env: { ...env, HOST: '127.0.0.1' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  onCleanup(() => {
    child.kill('SIGKILL');
    if (KEEP_PROFILE) console.error(`${name}: callgrind's output kept in ${path.dirname(out)}`);
    else fs.rmSync(path.dirname(out), { recursive: true, force: true });
  });
  const lines = [];
  for (const stream of [child.stdout, child.stderr]) {
    stream.setEncoding('utf8');
    stream.on('data', (text) => lines.push(...text.split('\n')));
  }
  const deadline = Date.now() + START_TIMEOUT_MS * 10;
  for (;;) {
    if (await ready(lines)) return { name, pid: child.pid, out, lines };
    if (child.exitCode !== null) throw new Error(`${name} exited: ${lines.slice(-20).join('\n')}`);
    if (Date.now() > deadline) throw new Error(`${name} did not start under valgrind`);
    await sleep(500);
  }
}

/** Answers `n` requests, `CONCURRENCY` at a time, as small-queries.mjs sends them; each must succeed. */
async function load(url, headers, n) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const body = Buffer.from(JSON.stringify({ statement: STATEMENT }));
  const options = {
    method: 'POST',
    agent,
    body,
    headers: { ...headers, 'content-type': 'application/json', 'content-length': body.length },
  };
  let left = n;
  try {
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (left-- > 0) {
          const res = await request(url, options);
          if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${res.body.slice(0, 300)}`);
        }
      }),
    );
  } finally {
    agent.destroy();
  }
}

/** Instructions of the last dump, split by what ran them. */
function counted(out) {
  const dumps = fs
    .readdirSync(path.dirname(out))
    .filter((f) => f.startsWith(path.basename(out)))
    .map((f) => path.join(path.dirname(out), f));
  const file = dumps.sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0];
  const text = execFileSync('callgrind_annotate', ['--threshold=100', file], {
    maxBuffer: 256 * 2 ** 20,
  }).toString();
  const split = { total: 0, compiler: 0, gc: 0 };
  for (const line of text.split('\n')) {
    const match = /^\s*([\d,]+) \(.*?\)\s+(.*)$/.exec(line);
    if (!match) continue;
    const n = Number(match[1].replaceAll(',', ''));
    if (match[2].includes('PROGRAM TOTALS')) split.total = n;
    else if (/compiler::|Zone|[Mm]aglev|turboshaft|baseline::|interpreter::Bytecode/.test(match[2]))
      split.compiler += n;
    else if (/Scaveng|MarkCompact|Marking|Sweeper|heap::|Heap::|MinorMC/.test(match[2]))
      split.gc += n;
  }
  return split;
}

/** Splits of the dump just written. */
async function dumped(target) {
  control(target.pid, '-d');
  await sleep(1000);
  return counted(target.out);
}

/**
 * Warms the target up, then counts the instructions of REQUESTS requests, less those of as long a
 * time with no request (what its timers run): a timer's work would otherwise count as many times
 * more as callgrind slows the requests down.
 */
async function measure({ counted: target, url: base, headers }) {
  const url = `${base}/v1/execute`;
  await load(url, headers, WARM_UP);
  control(target.pid, '-i', 'on');
  const start = Date.now();
  await load(url, headers, REQUESTS);
  const seconds = (Date.now() - start) / 1000;
  const busy = await dumped(target);
  const quietFrom = Date.now();
  await sleep(seconds * 1000);
  const quietSeconds = (Date.now() - quietFrom + 1000) / 1000;
  const idle = await dumped(target);
  const per = (key) => (busy[key] - (idle[key] * seconds) / quietSeconds) / REQUESTS / 1e6;
  const rest = (split) => split.total - split.compiler - split.gc;
  return {
    total: per('total'),
    compiler: per('compiler'),
    gc: per('gc'),
    rest: (rest(busy) - (rest(idle) * seconds) / quietSeconds) / REQUESTS / 1e6,
    idle: rest(idle) / quietSeconds / 1e6,
    seconds,
  };
}

/** True once a line starts with `prefix`. */
const printed = (prefix) => async (lines) => lines.some((l) => l.startsWith(prefix));

/**
 * Sluice with the process measured under callgrind: an api of its own beside the started one
 * (same Redis prefix, its own port), or a worker of its own in place of the started one (stopped
 * once the measured one consumes the queue).
 */
async function sluice() {
  // Its own admin: another bench's start resets the password of the usual one.
  const started = await startSluice({
    adminUser: `bench_instructions_${randomBytes(3).toString('hex')}`,
    env: { SLUICE_MAX_ACTIVE_PER_USER: String(CONCURRENCY * 2) },
  });
  if (PROCESS === 'worker') {
    const worker = await callgrind(
      'Sluice worker',
      'dist/apps/worker/src/main.js',
      started.env,
      async (lines) => lines.some((l) => l.includes('consuming the interactive lane')),
    );
    await started.worker.stop();
    return { counted: worker, url: started.baseUrl, headers: started.headers };
  }
  const port = await freePort();
  const api = await callgrind(
    'Sluice api',
    'dist/apps/api/src/main.js',
    { ...started.env, PORT: String(port) },
    async () => {
      try {
        return (await fetch(`http://127.0.0.1:${port}/v1/info`)).ok;
      } catch {
        return false;
      }
    },
  );
  const url = `http://127.0.0.1:${port}`;
  // Each api start sets the admin's password again: its token is taken once both have started.
  await sleep(5000);
  const headers = await login(
    url,
    started.env.SLUICE_ADMIN_USER,
    started.env.SLUICE_ADMIN_PASSWORD,
  );
  return { counted: api, url, headers };
}

/** Waits until what `child` printed passes `ready`. */
async function started(child, ready) {
  for (const deadline = Date.now() + START_TIMEOUT_MS; !ready(child.lines); await sleep(100)) {
    if (Date.now() > deadline) throw new Error(`${child.name} did not start`);
  }
}

/** The skeleton with its api or its worker under callgrind, the other one normal. */
async function skeleton() {
  const env = skeletonEnv();
  const file = 'bench/skeleton-baseline.mjs';
  const workerEnv = { ...env, BENCH_SKELETON_ROLE: 'worker' };
  const apiEnv = { ...env, BENCH_SKELETON_ROLE: 'api' };
  let worker;
  if (PROCESS === 'worker') {
    worker = await callgrind('skeleton worker', file, workerEnv, printed('skeleton worker ready'));
  } else {
    const child = startChild('skeleton worker', file, workerEnv);
    onCleanup(child.stop);
    await started(child, (lines) => lines.some((l) => l.startsWith('skeleton worker ready')));
  }
  const urlOf = (lines) =>
    lines
      .find((l) => l.startsWith('skeleton api on '))
      ?.slice('skeleton api on '.length)
      .trim();
  if (PROCESS === 'api') {
    const api = await callgrind('skeleton api', file, apiEnv, async (lines) => urlOf(lines));
    return { counted: api, url: urlOf(api.lines), headers: {} };
  }
  const api = startChild('skeleton api', file, apiEnv);
  onCleanup(api.stop);
  await started(api, urlOf);
  return { counted: worker, url: urlOf(api.lines), headers: {} };
}

await runMain(async () => {
  const rows = [];
  const starts = { skeleton, sluice };
  for (const start of TARGETS.map((t) => starts[t])) {
    const target = await start();
    rows.push({ name: target.counted.name, ...(await measure(target)) });
    console.error(`${target.counted.name}: measured`);
  }
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT })
    .toString()
    .trim();
  console.log(
    `\n### instructions.mjs (${PROCESS}) — ${new Date().toISOString()}, commit ${commit}, ` +
      `${REQUESTS} requests after ${WARM_UP}, ${CONCURRENCY} at a time${NODE_ARGS.length ? `, node ${NODE_ARGS.join(' ')}` : ''}\n`,
  );
  console.log(
    `| ${PROCESS} | instructions a request (M) | V8 compilers | GC | the rest | time under callgrind | idle: the rest a second (M) |`,
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    console.log(
      `| ${r.name} | ${r.total.toFixed(2)} | ${r.compiler.toFixed(2)} | ${r.gc.toFixed(2)} | **${r.rest.toFixed(2)}** | ${r.seconds.toFixed(1)} s | ${r.idle.toFixed(2)} |`,
    );
  }
  const [base, ours] = ['skeleton', 'Sluice'].map((who) =>
    rows.find((r) => r.name.startsWith(who)),
  );
  if (!base || !ours) return;
  console.log(
    `\n- Sluice's ${PROCESS} runs ${(ours.rest / base.rest).toFixed(2)}× the skeleton ${PROCESS}'s instructions a request (the rest), ${(ours.total / base.total).toFixed(2)}× in all.`,
  );
});
