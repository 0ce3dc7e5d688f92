// Small-query throughput and latency: Sluice (api + worker over Redis) against a direct Fastify + pg
// endpoint, same machine, same statement, same load. Run by hand (never in CI):
//
//   npm run build && node bench/small-queries.mjs
//
// Needs PostgreSQL and Redis on loopback. Bounded in time: warm-up + duration per target, plus a
// hard overall limit. Everything it starts (child processes, Redis keys) is removed at the end, also
// on error and on Ctrl-C. See bench/README.md for the settings.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { startDirectBaseline } from './direct-baseline.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function envInt(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0)
    throw new Error(`${name} must be a positive integer, got "${raw}"`);
  return n;
}

const SETTINGS = {
  databaseUrl: process.env.BENCH_DATABASE_URL || 'postgresql://root@127.0.0.1:5432/test',
  redisUrl: process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379',
  seconds: envInt('BENCH_SECONDS', 10),
  warmupSeconds: envInt('BENCH_WARMUP_SECONDS', 2),
  concurrency: envInt('BENCH_CONCURRENCY', 32),
  requestTimeoutMs: 10_000,
  startTimeoutMs: 30_000,
  statement: 'select g, md5(g::text) from generate_series(1,10) g',
  expectedRows: 10,
};
// Goals from the issue.
const GOAL_THROUGHPUT_RATIO = 0.5;
const GOAL_ADDED_P50_MS = 2;
// Whatever happens (hung child, stuck socket), the bench ends by then.
const HARD_LIMIT_MS =
  2 * (SETTINGS.warmupSeconds + SETTINGS.seconds) * 1000 + 3 * SETTINGS.startTimeoutMs + 30_000;

// ---------------------------------------------------------------------------------------------
// Cleanup: registered as things are started, run once (normal end, error, signal, hard limit).

const cleanups = [];
let cleaning;
function cleanup() {
  cleaning ??= (async () => {
    for (const fn of cleanups.reverse()) {
      try {
        await fn();
      } catch (err) {
        console.error(`cleanup: ${err instanceof Error ? err.message : err}`);
      }
    }
  })();
  return cleaning;
}
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    console.error(`\n${signal}: stopping`);
    void cleanup().finally(() => process.exit(130));
  });
}
setTimeout(() => {
  console.error(`bench: hard time limit (${HARD_LIMIT_MS / 1000} s) reached, stopping`);
  void cleanup().finally(() => process.exit(2));
}, HARD_LIMIT_MS).unref();

// ---------------------------------------------------------------------------------------------
// Helpers

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** One HTTP request; never rejects (errors come back as status 0) so the load loop stays simple. */
function request(
  url,
  { method = 'GET', headers = {}, body, agent, timeoutMs = SETTINGS.requestTimeoutMs } = {},
) {
  return new Promise((resolve) => {
    const req = http.request(url, { method, agent, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', (err) => resolve({ status: 0, body: `response error: ${err.message}` }));
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    req.on('error', (err) => resolve({ status: 0, body: `request error: ${err.message}` }));
    req.end(body);
  });
}

function jsonRequest(url, payload, headers = {}, agent) {
  const body = Buffer.from(JSON.stringify(payload));
  return request(url, {
    method: 'POST',
    agent,
    body,
    headers: { 'content-type': 'application/json', 'content-length': body.length, ...headers },
  });
}

/** A whole, successful result: every row there, and (Sluice) the final status says OK. */
function isGoodResult(res) {
  if (res.status !== 200) return false;
  try {
    const parsed = JSON.parse(res.body);
    if (!Array.isArray(parsed.data) || parsed.data.length !== SETTINGS.expectedRows) return false;
    return parsed.status === undefined || parsed.status.sql_state === '00000';
  } catch {
    return false;
  }
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

// ---------------------------------------------------------------------------------------------
// CPU accounting from /proc (Linux only), to tell which process saturates during the window.

const CLK_TCK = 100;

function procTicks(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]); // utime + stime, all threads
  } catch {
    return 0; // gone
  }
}

function pidsNamed(comm) {
  const pids = [];
  let entries = [];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return pids;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (fs.readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === comm) pids.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

function machineTicks() {
  try {
    const [, ...nums] = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
    const v = nums.map(Number);
    const idle = v[3] + (v[4] ?? 0);
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  } catch {
    return undefined;
  }
}

/**
 * CPU ticks per pid of each labelled group. A group is a pid list or a process name (comm), looked up
 * again at every snapshot so that backends which start or end within the window are counted right.
 */
function cpuSnapshot(groups) {
  const ticks = {};
  for (const [label, members] of Object.entries(groups)) {
    const pids = typeof members === 'string' ? pidsNamed(members) : members;
    ticks[label] = new Map(pids.map((pid) => [pid, procTicks(pid)]));
  }
  return { at: performance.now(), ticks, machine: machineTicks() };
}

/** Per group, % of one core used between two snapshots; "other" is what no group accounts for. */
function cpuPercent(before, after) {
  const seconds = (after.at - before.at) / 1000;
  const out = {};
  let grouped = 0;
  for (const [label, pids] of Object.entries(after.ticks)) {
    let delta = 0;
    for (const [pid, t] of pids) {
      if (t === 0) continue; // exited before the second snapshot: its last ticks are lost
      delta += t - (before.ticks[label].get(pid) ?? 0);
    }
    out[label] = (delta / CLK_TCK / seconds) * 100;
    grouped += out[label];
  }
  if (before.machine && after.machine) {
    const total = after.machine.total - before.machine.total;
    const busy = total > 0 ? ((after.machine.busy - before.machine.busy) / total) * 100 : NaN;
    const cores = os.cpus().length;
    out['other processes'] = Math.max(0, busy * cores - grouped);
    out[`machine busy (${cores} cores = ${cores * 100}%)`] = busy * cores;
  }
  return out;
}

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
// Sluice processes

/** Keeps the last lines of a child's output, shown when something goes wrong. */
function tail(stream, lines, max = 40) {
  let partial = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop();
    for (const line of parts) {
      lines.push(line);
      if (lines.length > max) lines.shift();
    }
  });
}

function startChild(name, script, env) {
  const file = path.join(ROOT, script);
  if (!fs.existsSync(file)) throw new Error(`${file} is missing: run \`npm run build\` first`);
  const child = spawn(process.execPath, [file], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines = [];
  tail(child.stdout, lines);
  tail(child.stderr, lines);
  let expected = false;
  const exited = new Promise((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  // A child that dies on its own aborts whatever is waiting on `died`.
  const died = exited.then(({ code, signal }) => {
    if (expected) return new Promise(() => {});
    throw new Error(
      `${name} exited (code ${code}, signal ${signal}); last output:\n  ${lines.join('\n  ')}`,
    );
  });
  died.catch(() => {}); // observed by whoever races it
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    expected = true;
    child.kill('SIGTERM');
    const done = await Promise.race([exited.then(() => true), sleep(5000, false)]);
    if (!done) {
      child.kill('SIGKILL');
      await exited;
    }
  };
  return { name, pid: child.pid, lines, died, stop };
}

async function waitForInfo(baseUrl, children) {
  const deadline = Date.now() + SETTINGS.startTimeoutMs;
  const infoUrl = new URL('/v1/info', baseUrl);
  let last = '';
  while (Date.now() < deadline) {
    const res = await Promise.race([
      request(infoUrl, { timeoutMs: 2000 }),
      ...children.map((c) => c.died),
    ]);
    if (res.status === 200) return;
    last = `HTTP ${res.status} ${res.body.slice(0, 200)}`;
    await sleep(200);
  }
  throw new Error(`GET /v1/info not 200 after ${SETTINGS.startTimeoutMs / 1000} s (last: ${last})`);
}

/** The worker may register after the api answers: wait for one whole result before measuring. */
async function waitForFirstResult(baseUrl, headers, children) {
  const deadline = Date.now() + SETTINGS.startTimeoutMs;
  const url = new URL('/v1/execute', baseUrl);
  let last;
  while (Date.now() < deadline) {
    last = await Promise.race([
      jsonRequest(url, { statement: SETTINGS.statement }, headers),
      ...children.map((c) => c.died),
    ]);
    if (isGoodResult(last)) return;
    await sleep(250);
  }
  throw new Error(
    `no successful execute in ${SETTINGS.startTimeoutMs / 1000} s; last: HTTP ${last?.status} ${last?.body}`,
  );
}

async function deleteRedisKeys(prefix) {
  const redis = new Redis(SETTINGS.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 });
  await redis.connect();
  let deleted = 0;
  try {
    // Sluice's own keys start with the prefix; BullMQ's with the prefix in a hash tag.
    for (const match of [`${prefix}*`, `{${prefix}}*`]) {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', match, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) deleted += await redis.unlink(...keys);
      } while (cursor !== '0');
    }
  } finally {
    redis.disconnect();
  }
  return deleted;
}

async function startSluice() {
  const prefix = `bench-${randomBytes(6).toString('hex')}`;
  const password = randomBytes(18).toString('base64url');
  const port = await freePort();
  const env = {
    ...process.env,
    DATABASE_URL: SETTINGS.databaseUrl,
    REDIS_URL: SETTINGS.redisUrl,
    SLUICE_JWT_SECRET: randomBytes(24).toString('base64url'), // 32 characters
    SLUICE_ADMIN_USER: 'bench',
    SLUICE_ADMIN_PASSWORD: password,
    SLUICE_KEY_PREFIX: prefix,
    PORT: String(port),
    HOST: '127.0.0.1', // loopback only
    NO_COLOR: '1', // plain log lines in the error report
  };
  // Registered before the children start, so keys written by a failed start go too.
  cleanups.push(async () => {
    const n = await deleteRedisKeys(prefix);
    console.error(`cleanup: deleted ${n} Redis keys with prefix ${prefix}`);
  });
  const worker = startChild('worker', 'dist/apps/worker/src/main.js', env);
  cleanups.push(worker.stop);
  const api = startChild('api', 'dist/apps/api/src/main.js', env);
  cleanups.push(api.stop);
  const children = [worker, api];

  const baseUrl = `http://127.0.0.1:${port}`;
  await waitForInfo(baseUrl, children);
  const login = await jsonRequest(new URL('/v1/login', baseUrl), { username: 'bench', password });
  if (login.status !== 200) throw new Error(`login failed: HTTP ${login.status} ${login.body}`);
  const headers = { authorization: `Bearer ${JSON.parse(login.body).access_token}` };
  await waitForFirstResult(baseUrl, headers, children);
  return { baseUrl, headers, worker, api, children, prefix };
}

// ---------------------------------------------------------------------------------------------
// Report

function machineDescription() {
  const cpus = os.cpus();
  const model = cpus[0]?.model.trim() ?? 'unknown CPU';
  const gib = (os.totalmem() / 2 ** 30).toFixed(1);
  return `${cpus.length} × ${model}, ${gib} GiB RAM, Node ${process.version}, ${os.type()} ${os.release()} ${os.arch()}`;
}

function gitDescription() {
  try {
    const sha = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'apps', 'libs'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    return `${sha}${dirty.trim() ? ' + uncommitted changes in apps/ or libs/' : ''}`;
  } catch {
    return 'unknown';
  }
}

/** Sources newer than dist/ mean the bench measures older code than the tree shows. */
function newestMtime(dir, ext) {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(full, ext));
    else if (entry.name.endsWith(ext)) newest = Math.max(newest, fs.statSync(full).mtimeMs);
  }
  return newest;
}

function staleBuildWarning() {
  try {
    const src = Math.max(
      newestMtime(path.join(ROOT, 'apps'), '.ts'),
      newestMtime(path.join(ROOT, 'libs'), '.ts'),
    );
    const built = fs.statSync(path.join(ROOT, 'dist/apps/api/src/main.js')).mtimeMs;
    return src > built
      ? 'warning: some .ts under apps/ or libs/ is newer than dist/: run `npm run build`'
      : undefined;
  } catch {
    return undefined;
  }
}

const ms = (v) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a');

function report(direct, sluice) {
  const row = (r) =>
    `| ${r.label} | ${r.requests} | ${Math.round(r.rps)} | ${ms(r.p50)} | ${ms(r.p90)} | ${ms(r.p99)} | ${r.errors} |`;
  const ratio = sluice.rps / direct.rps;
  const addedP50 = sluice.p50 - direct.p50;
  const ratioMet = ratio >= GOAL_THROUGHPUT_RATIO;
  const p50Met = addedP50 <= GOAL_ADDED_P50_MS;
  const cpuLine = (r) =>
    Object.entries(r.cpu)
      .map(([k, v]) => `${k} ${Math.round(v)}%`)
      .join(', ');

  const out = [
    `### Small queries — ${new Date().toISOString()}`,
    '',
    `- Machine: ${machineDescription()}`,
    `- Load average at start: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
    `- Code: ${gitDescription()}`,
    `- Load: ${SETTINGS.concurrency} keep-alive clients (node:http), closed loop, ${SETTINGS.seconds} s after ${SETTINGS.warmupSeconds} s warm-up, ` +
      `client in the same process as the direct server`,
    `- Statement: \`${SETTINGS.statement}\` (JSON body, default format)`,
    '',
    '| target | requests | req/s | p50 ms | p90 ms | p99 ms | errors |',
    '|---|---:|---:|---:|---:|---:|---:|',
    row(direct),
    row(sluice),
    '',
    `- Throughput Sluice/direct: **${ratio.toFixed(2)}×** (goal ≥ ${GOAL_THROUGHPUT_RATIO}×: ${ratioMet ? 'met' : 'NOT met'})`,
    `- Added p50 latency: **${ms(addedP50)} ms** (goal ≤ ${GOAL_ADDED_P50_MS} ms: ${p50Met ? 'met' : 'NOT met'})`,
    '',
    'CPU during the measured window (100% = one core):',
    '',
    `- direct: ${cpuLine(direct)}`,
    `- Sluice: ${cpuLine(sluice)}`,
  ];
  for (const r of [direct, sluice]) {
    if (r.errorSamples.length > 0) {
      out.push('', `First errors (${r.label}):`, ...r.errorSamples.map((s) => `    ${s}`));
    }
  }
  console.log(`\n${out.join('\n')}\n`);
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const warning = staleBuildWarning();
  if (warning) console.error(warning);
  // Shared services, looked up by process name (other users of them show up here too).
  const external = { postgres: 'postgres', redis: 'redis-server' };

  // Direct baseline first, in this process, closed before Sluice starts so they never overlap.
  const directServer = await startDirectBaseline({
    databaseUrl: SETTINGS.databaseUrl,
    poolSize: 16,
  });
  cleanups.push(() => directServer.close());
  const direct = await runLoad({
    label: 'direct (Fastify + pg)',
    url: directServer.url,
    cpuGroups: { 'bench (client + server)': [process.pid], ...external },
  });
  await directServer.close();

  const sluice = await startSluice();
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
  report(direct, result);
}

try {
  await main();
  await cleanup();
} catch (err) {
  console.error(`\nbench failed: ${err instanceof Error ? err.message : err}`);
  await cleanup();
  process.exitCode = 1;
}
