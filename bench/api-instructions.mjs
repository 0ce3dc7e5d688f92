// What the api process costs a small query, counted in instructions rather than seconds: Sluice's
// api and the skeleton's (bench/skeleton-baseline.mjs), each run under valgrind's callgrind
// beside a normal worker, given the same load, instrumented only while BENCH_REQUESTS requests
// are answered after BENCH_WARM_UP ones. Instructions do not depend on what else the machine
// runs, as seconds do on a shared two-core machine: two builds can be told apart by a few percent
// (run it from each checkout). Counted: user-space instructions of every thread of the api
// (kernel time is not), split into V8's optimizing compilers (what a longer warm-up lowers), its
// garbage collectors, and the rest (the code that answers the requests).
//
//   npm run build && node bench/api-instructions.mjs        (about 5 minutes; needs valgrind)
//
// BENCH_REQUESTS (default 1000), BENCH_WARM_UP (3000), BENCH_CONCURRENCY (32),
// BENCH_API_NODE_ARGS: node flags of the two apis under callgrind (e.g. --max-semi-space-size=32);
// BENCH_TARGETS=sluice (or skeleton): only that api. BENCH_KEEP_PROFILE=1 keeps callgrind's output
// (its directory is printed), to read with callgrind_annotate.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  DATABASE_URL,
  REDIS_URL,
  ROOT,
  START_TIMEOUT_MS,
  deleteRedisKeys,
  envInt,
  freePort,
  installGuards,
  login,
  onCleanup,
  request,
  runMain,
  startChild,
  startSluice,
} from './lib/service.mjs';

const REQUESTS = envInt('BENCH_REQUESTS', 1000);
const WARM_UP = envInt('BENCH_WARM_UP', 3000);
const CONCURRENCY = envInt('BENCH_CONCURRENCY', 32);
const NODE_ARGS = (process.env.BENCH_API_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
const TARGETS = (process.env.BENCH_TARGETS ?? 'skeleton,sluice').split(',').map((t) => t.trim());
const KEEP_PROFILE = process.env.BENCH_KEEP_PROFILE === '1';
const STATEMENT = 'select g, md5(g::text) from generate_series(1,10) g';
installGuards(20 * 60 * 1000);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** callgrind_control finds its target by the HOST the target saw (the bench's env sets one). */
function control(pid, ...args) {
  return execFileSync('callgrind_control', [...args, String(pid)], {
    env: { ...process.env, HOST: '127.0.0.1' },
  }).toString();
}

/** An api under callgrind, not instrumented until asked; resolves with its URL. */
async function callgrindApi(name, script, env, urlOf) {
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
    const url = await urlOf(lines);
    if (url) return { name, pid: child.pid, url, out };
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
async function dumped(api) {
  control(api.pid, '-d');
  await sleep(1000);
  return counted(api.out);
}

/**
 * Warms `api` up, then counts the instructions of REQUESTS requests, less those of as long a time
 * with no request (what its timers run): a timer's work would otherwise count as many times more
 * as callgrind slows the requests down.
 */
async function measure(api, headers) {
  const url = `${api.url}/v1/execute`;
  await load(url, headers, WARM_UP);
  control(api.pid, '-i', 'on');
  const start = Date.now();
  await load(url, headers, REQUESTS);
  const seconds = (Date.now() - start) / 1000;
  const busy = await dumped(api);
  const quietFrom = Date.now();
  await sleep(seconds * 1000);
  const quietSeconds = (Date.now() - quietFrom + 1000) / 1000;
  const idle = await dumped(api);
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

async function sluiceApi() {
  // Its own admin: another bench's start resets the password of the usual one.
  const sluice = await startSluice({
    adminUser: `bench_instructions_${randomBytes(3).toString('hex')}`,
    env: { SLUICE_MAX_ACTIVE_PER_USER: String(CONCURRENCY * 2) },
  });
  const port = await freePort();
  const api = await callgrindApi(
    'Sluice api',
    'dist/apps/api/src/main.js',
    { ...sluice.env, PORT: String(port) },
    async () => {
      try {
        return (await fetch(`http://127.0.0.1:${port}/v1/info`)).ok
          ? `http://127.0.0.1:${port}`
          : undefined;
      } catch {
        return undefined;
      }
    },
  );
  // Each api start sets the admin's password again: its token is taken once both have started.
  await sleep(5000);
  const headers = await login(
    api.url,
    sluice.env.SLUICE_ADMIN_USER,
    sluice.env.SLUICE_ADMIN_PASSWORD,
  );
  return { api, headers };
}

async function skeletonApi() {
  const id = `bench-skeleton-${randomBytes(6).toString('hex')}`;
  const env = {
    ...process.env,
    BENCH_DATABASE_URL: DATABASE_URL,
    BENCH_REDIS_URL: REDIS_URL,
    BENCH_SKELETON_PREFIX: `{${id}}`,
  };
  onCleanup(() => deleteRedisKeys(id, REDIS_URL));
  const file = 'bench/skeleton-baseline.mjs';
  const worker = startChild('skeleton worker', file, { ...env, BENCH_SKELETON_ROLE: 'worker' });
  onCleanup(worker.stop);
  for (const deadline = Date.now() + START_TIMEOUT_MS; ; await sleep(100)) {
    if (worker.lines.some((l) => l.startsWith('skeleton worker ready'))) break;
    if (Date.now() > deadline) throw new Error('skeleton worker did not start');
  }
  const api = await callgrindApi(
    'skeleton api',
    file,
    { ...env, BENCH_SKELETON_ROLE: 'api' },
    async (lines) => {
      const line = lines.find((l) => l.startsWith('skeleton api on '));
      return line?.slice('skeleton api on '.length).trim();
    },
  );
  return { api, headers: {} };
}

await runMain(async () => {
  const rows = [];
  const starts = { skeleton: skeletonApi, sluice: sluiceApi };
  for (const start of TARGETS.map((t) => starts[t])) {
    const { api, headers } = await start();
    rows.push({ name: api.name, ...(await measure(api, headers)) });
    console.error(`${api.name}: measured`);
  }
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT })
    .toString()
    .trim();
  console.log(
    `\n### api-instructions.mjs — ${new Date().toISOString()}, commit ${commit}, ` +
      `${REQUESTS} requests after ${WARM_UP}, ${CONCURRENCY} at a time${NODE_ARGS.length ? `, node ${NODE_ARGS.join(' ')}` : ''}\n`,
  );
  console.log(
    '| api | instructions a request (M) | V8 compilers | GC | the rest | time under callgrind | idle: the rest a second (M) |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    console.log(
      `| ${r.name} | ${r.total.toFixed(2)} | ${r.compiler.toFixed(2)} | ${r.gc.toFixed(2)} | **${r.rest.toFixed(2)}** | ${r.seconds.toFixed(1)} s | ${r.idle.toFixed(2)} |`,
    );
  }
  const skeleton = rows.find((r) => r.name === 'skeleton api');
  const sluice = rows.find((r) => r.name === 'Sluice api');
  if (!skeleton || !sluice) return;
  console.log(
    `\n- Sluice's api runs ${(sluice.rest / skeleton.rest).toFixed(2)}× the skeleton api's instructions a request (the rest), ${(sluice.total / skeleton.total).toFixed(2)}× in all.`,
  );
});
