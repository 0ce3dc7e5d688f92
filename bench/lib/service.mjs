// Shared by the bench scripts: settings from the environment, cleanup on exit/error/signal/time
// limit, HTTP helpers, /proc sampling (CPU, RSS), starting Sluice's api and worker from dist/ as
// child processes with a random Redis key prefix, and the machine description for the reports.
//
// Importing it starts nothing: call installGuards() for the signal handlers and the hard time
// limit, and runMain() to run a bench and its cleanup.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import pg from 'pg';

import { ROOT, warnIfStale } from './env.mjs';

export { ROOT, envInt, requireDist, staleBuildWarning, warnIfStale } from './env.mjs';

// ---------------------------------------------------------------------------------------------
// Settings

export const DATABASE_URL =
  process.env.BENCH_DATABASE_URL || 'postgresql://root@127.0.0.1:5432/test';
export const REDIS_URL = process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379';
export const START_TIMEOUT_MS = 30_000;
/** The small query every small-query bench sends (ten rows): one, so that their figures compare. */
export const SMALL_STATEMENT = 'select g, md5(g::text) from generate_series(1,10) g';

// ---------------------------------------------------------------------------------------------
// Cleanup: registered as things are started, run once (normal end, error, signal, hard limit).

const cleanups = [];
let cleaning;

/** Registers a step of the cleanup; steps run in reverse order of registration. */
export function onCleanup(fn) {
  cleanups.push(fn);
}

export function cleanup() {
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

/** Ctrl-C / SIGTERM and a hard time limit both run the cleanup and end the process. */
export function installGuards(hardLimitMs) {
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.once(signal, () => {
      console.error(`\n${signal}: stopping`);
      void cleanup().finally(() => process.exit(130));
    });
  }
  setTimeout(() => {
    console.error(`bench: hard time limit (${Math.round(hardLimitMs / 1000)} s) reached, stopping`);
    void cleanup().finally(() => process.exit(2));
  }, hardLimitMs).unref();
}

/** Runs main, then the cleanup; on failure prints the error and exits 1 after the cleanup. */
export async function runMain(main) {
  try {
    await main();
    await cleanup();
  } catch (err) {
    console.error(`\nbench failed: ${err instanceof Error ? err.message : err}`);
    await cleanup();
    process.exitCode = 1;
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP helpers

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** One HTTP request; never rejects (errors come back as status 0) so load loops stay simple. */
export function request(
  url,
  { method = 'GET', headers = {}, body, agent, timeoutMs = 10_000 } = {},
) {
  return new Promise((resolve) => {
    const req = http.request(url, { method, agent, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
      res.on('error', (err) => resolve({ status: 0, body: `response error: ${err.message}` }));
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    req.on('error', (err) => resolve({ status: 0, body: `request error: ${err.message}` }));
    req.end(body);
  });
}

/**
 * POST /v1/execute on a connection of its own (no agent), with the Sluice credentials; the caller
 * ends it with `body` and handles the response in `onResponse`.
 */
export function executeRequest(sluice, body, accept, onResponse) {
  const headers = {
    ...sluice.headers,
    'content-type': 'application/json',
    'content-length': body.length,
  };
  if (accept) headers.accept = accept;
  return http.request(
    new URL('/v1/execute', sluice.baseUrl),
    { method: 'POST', agent: false, headers },
    onResponse,
  );
}

export function jsonRequest(url, payload, headers = {}, agent, timeoutMs) {
  const body = Buffer.from(JSON.stringify(payload));
  return request(url, {
    method: 'POST',
    agent,
    body,
    timeoutMs,
    headers: { 'content-type': 'application/json', 'content-length': body.length, ...headers },
  });
}

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

export function median(values) {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export const ms = (v) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a');
export const mb = (bytes) => (Number.isFinite(bytes) ? (bytes / 2 ** 20).toFixed(1) : 'n/a');

// ---------------------------------------------------------------------------------------------
// CPU accounting from /proc (Linux only), to tell which process saturates during a window.

const CLK_TCK = 100;

/** utime and stime in ticks: of all threads from /proc/<pid>/stat, of one from /proc/<pid>/task/<tid>/stat. */
function procTimes(pid, file = `/proc/${pid}/stat`) {
  try {
    const stat = fs.readFileSync(file, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { user: Number(fields[11]), system: Number(fields[12]) };
  } catch {
    return { user: 0, system: 0 }; // gone
  }
}

function procTicks(pid, file) {
  const { user, system } = procTimes(pid, file);
  return user + system;
}

/**
 * Write system calls a process made so far, all its threads (`syscw` in /proc/<pid>/io: write and
 * writev, which Node and Redis send socket data with; PostgreSQL's send() is not counted).
 */
function procWrites(pid) {
  try {
    const m = /^syscw:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/io`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0; // gone, or not ours to read
  }
}

/**
 * Context switches of a process so far, all its threads (/proc/<pid>/task/<tid>/status):
 * voluntary (the thread blocked: it waits for a socket, a lock, a message) and involuntary (the
 * scheduler took the CPU from it: more runnable threads than cores).
 */
function procSwitches(pid) {
  let voluntary = 0;
  let involuntary = 0;
  let tids = [];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return { voluntary, involuntary }; // gone
  }
  for (const tid of tids) {
    try {
      const status = fs.readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
      voluntary += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
      involuntary += Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
    } catch {
      // the thread ended meanwhile: its switches leave the count with it
    }
  }
  return { voluntary, involuntary };
}

export function pidsNamed(comm) {
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
export function cpuSnapshot(groups) {
  const ticks = {};
  const mainTicks = {};
  const systemTicks = {};
  const writes = {};
  const switches = {};
  for (const [label, members] of Object.entries(groups)) {
    const pids = typeof members === 'string' ? pidsNamed(members) : members;
    const times = pids.map((pid) => [pid, procTimes(pid)]);
    ticks[label] = new Map(times.map(([pid, t]) => [pid, t.user + t.system]));
    systemTicks[label] = new Map(times.map(([pid, t]) => [pid, t.system]));
    // A Node process's main thread is the thread whose id is the pid; the rest are its pool's
    // worker threads, V8's helpers (GC) and libuv's.
    if (typeof members !== 'string') {
      mainTicks[label] = pids.reduce(
        (sum, pid) => sum + procTicks(pid, `/proc/${pid}/task/${pid}/stat`),
        0,
      );
    }
    writes[label] = new Map(pids.map((pid) => [pid, procWrites(pid)]));
    switches[label] = new Map(pids.map((pid) => [pid, procSwitches(pid)]));
  }
  return {
    at: performance.now(),
    ticks,
    mainTicks,
    systemTicks,
    writes,
    switches,
    machine: machineTicks(),
  };
}

/** Per group given as pids, % of one core its processes' main threads used between two snapshots. */
export function mainThreadPercent(before, after) {
  const seconds = (after.at - before.at) / 1000;
  const out = {};
  for (const [label, ticks] of Object.entries(after.mainTicks)) {
    out[label] = ((ticks - (before.mainTicks[label] ?? 0)) / CLK_TCK / seconds) * 100;
  }
  return out;
}

/**
 * What Redis did, counted by itself: the calls of each command (INFO commandstats, commands run
 * inside scripts included). Compared before and after a window (serverWork), they say what a
 * request costs Redis in work done, not only in CPU. Anything else using Redis meanwhile is
 * counted too: run on a quiet machine. (PostgreSQL's pg_stat_database is no such count: a pooled
 * backend reports its transactions only now and then, so a window's delta says nothing.)
 */
export async function serverCounts({ redisUrl = REDIS_URL } = {}) {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1, lazyConnect: true });
  try {
    await redis.connect();
    const info = await redis.info('commandstats');
    const commands = {};
    for (const line of info.split('\n')) {
      const m = line.match(/^cmdstat_([^:]+):calls=(\d+)/);
      if (m) commands[m[1]] = Number(m[2]);
    }
    return { commands };
  } finally {
    redis.disconnect();
  }
}

/** Per request between two serverCounts: Redis commands, script calls, the top commands. */
export function serverWork(before, after, requests) {
  const calls = {};
  for (const [name, n] of Object.entries(after.commands)) {
    const d = n - (before.commands[name] ?? 0);
    if (d > 0) calls[name] = d / requests;
  }
  const total = Object.values(calls).reduce((a, b) => a + b, 0);
  const scripts = ['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'fcall'].reduce(
    (sum, name) => sum + (calls[name] ?? 0),
    0,
  );
  const top = Object.entries(calls)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 8)
    .map(([name, n]) => `${name} ${n.toFixed(1)}`)
    .join(', ');
  return { redisCommands: total, redisScripts: scripts, top };
}

/**
 * Per group, % of one core its processes spent in the kernel (stime: system calls, the TCP stack of
 * loopback sends, page faults) between two snapshots: the rest of cpuPercent's figure is their own
 * code (utime). A CPU profile's samples cannot tell the two apart: they count a system call's
 * wall-clock time, also while the thread waits for the CPU after waking another process.
 */
export function systemPercent(before, after) {
  const seconds = (after.at - before.at) / 1000;
  const out = {};
  for (const [label, pids] of Object.entries(after.systemTicks)) {
    let delta = 0;
    for (const [pid, t] of pids) {
      const was = before.systemTicks[label]?.get(pid);
      if (after.ticks[label].get(pid) > 0) delta += t - (was ?? 0);
    }
    out[label] = (delta / CLK_TCK / seconds) * 100;
  }
  return out;
}

/** Per group, the write system calls made between two snapshots (by processes alive at both). */
export function writeCounts(before, after) {
  const out = {};
  for (const [label, pids] of Object.entries(after.writes)) {
    let delta = 0;
    for (const [pid, n] of pids) {
      const was = before.writes[label]?.get(pid);
      if (n > 0 && was !== undefined) delta += n - was;
    }
    out[label] = delta;
  }
  return out;
}

/**
 * Per group, the context switches made between two snapshots (by processes alive at both), as
 * `{ voluntary, involuntary }`.
 */
export function switchCounts(before, after) {
  const out = {};
  for (const [label, pids] of Object.entries(after.switches)) {
    const delta = { voluntary: 0, involuntary: 0 };
    for (const [pid, n] of pids) {
      const was = before.switches[label]?.get(pid);
      if (was === undefined) continue;
      delta.voluntary += n.voluntary - was.voluntary;
      delta.involuntary += n.involuntary - was.involuntary;
    }
    out[label] = delta;
  }
  return out;
}

/** Per group, % of one core used between two snapshots; "other" is what no group accounts for. */
export function cpuPercent(before, after) {
  const seconds = (after.at - before.at) / 1000;
  const out = {};
  let grouped = 0;
  for (const [label, pids] of Object.entries(after.ticks)) {
    let delta = 0;
    for (const [pid, t] of pids) {
      if (t === 0) continue; // exited before the second snapshot: its last ticks are lost
      delta += t - (before.ticks[label]?.get(pid) ?? 0); // new since: all its ticks
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

export const cpuLine = (cpu) =>
  Object.entries(cpu)
    .map(([k, v]) => `${k} ${Math.round(v)}%`)
    .join(', ');

/** The CPU groups of a running Sluice plus the shared services (looked up by process name). */
export function sluiceCpuGroups(sluice) {
  return {
    'bench client': [process.pid],
    api: [sluice.api.pid],
    worker: [sluice.worker.pid],
    postgres: 'postgres',
    redis: 'redis-server',
  };
}

// ---------------------------------------------------------------------------------------------
// Memory: VmRSS from /proc/<pid>/status (all threads of the process).

export function rssBytes(pid) {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return m ? Number(m[1]) * 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** Samples the RSS of each pid every intervalMs until stop(); stop() returns {pid: {first, peak, last}}. */
export function sampleRss(pids, intervalMs = 100) {
  const stats = new Map(pids.map((pid) => [pid, { first: rssBytes(pid), peak: 0, last: NaN }]));
  const take = () => {
    for (const [pid, s] of stats) {
      const v = rssBytes(pid);
      if (Number.isFinite(v)) {
        s.peak = Math.max(s.peak, v);
        s.last = v;
      }
    }
  };
  take();
  const timer = setInterval(take, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      take();
      return Object.fromEntries(stats);
    },
  };
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

/**
 * What a worker's environment gets from the way Sluice starts it (`npm run start:worker`, the
 * compose files: docs/architecture.md, "Garbage collection"), unless the caller's says otherwise.
 */
export const WORKER_LAUNCH_ENV = { MALLOC_ARENA_MAX: '2' };

export function startChild(name, script, env) {
  const file = path.join(ROOT, script);
  if (!fs.existsSync(file)) throw new Error(`${file} is missing: run \`npm run build\` first`);
  // A worker runs as its launch scripts run it.
  if (script === 'dist/apps/worker/src/main.js') env = { ...WORKER_LAUNCH_ENV, ...env };
  // BENCH_CHILD_NODE_ARGS: extra node flags for the api and worker, e.g. `--cpu-prof`.
  const nodeArgs = (process.env.BENCH_CHILD_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, file], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines = [];
  tail(child.stdout, lines);
  tail(child.stderr, lines);
  // BENCH_CHILD_OUTPUT_DIR: everything the api and worker print, kept in <dir>/<name>-<pid>.log
  // (with BENCH_CHILD_NODE_ARGS=--trace-gc, say).
  const outputDir = process.env.BENCH_CHILD_OUTPUT_DIR;
  if (outputDir) {
    fs.mkdirSync(outputDir, { recursive: true });
    const log = fs.createWriteStream(path.join(outputDir, `${name}-${child.pid}.log`));
    child.stdout.pipe(log);
    child.stderr.pipe(log);
  }
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
  const deadline = Date.now() + START_TIMEOUT_MS;
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
  throw new Error(`GET /v1/info not 200 after ${START_TIMEOUT_MS / 1000} s (last: ${last})`);
}

/** The worker may register after the api answers: wait for one whole result before measuring. */
async function waitForFirstResult(baseUrl, headers, children, statement, isGood) {
  const deadline = Date.now() + START_TIMEOUT_MS;
  const url = new URL('/v1/execute', baseUrl);
  let last;
  while (Date.now() < deadline) {
    last = await Promise.race([
      jsonRequest(url, { statement }, headers),
      ...children.map((c) => c.died),
    ]);
    if (isGood(last)) return;
    await sleep(250);
  }
  throw new Error(
    `no successful execute in ${START_TIMEOUT_MS / 1000} s; last: HTTP ${last?.status} ${last?.body}`,
  );
}

/** request() options of a POST /v1/execute of `statement` as Sluice's admin, over `agent`. */
export function executeOptions(sluice, statement, agent) {
  const body = Buffer.from(JSON.stringify({ statement }));
  return {
    method: 'POST',
    agent,
    body,
    headers: {
      ...sluice.headers,
      'content-type': 'application/json',
      'content-length': body.length,
    },
  };
}

/** A 200 whose JSON body has a `data` array and, if present, an OK final status. */
export function isOkJson(res, expectedRows) {
  if (res.status !== 200) return false;
  try {
    const parsed = JSON.parse(res.body);
    if (!Array.isArray(parsed.data)) return false;
    if (expectedRows !== undefined && parsed.data.length !== expectedRows) return false;
    return parsed.status === undefined || parsed.status.sql_state === '00000';
  } catch {
    return false;
  }
}

/** Redis's `used_memory` (the whole server's, other users included), in bytes. */
export async function redisUsedMemory(redis) {
  return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))[1]);
}

export async function deleteRedisKeys(prefix, redisUrl = REDIS_URL) {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 });
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

/**
 * Starts a worker and an api from dist/ with a random JWT secret, admin password and key prefix,
 * on a free loopback port; waits until it answers, logs in as the admin and gets one whole result.
 * Everything it starts is registered for the cleanup (children, then Redis keys).
 *
 * @param {{ env?: Record<string,string>, adminUser?: string, databaseUrl?: string, redisUrl?: string,
 *           firstStatement?: string, isGood?: (res) => boolean }} options
 *   env: extra settings for both children (e.g. SLUICE_CLIENT_IDLE_TIMEOUT_MS).
 */
export async function startSluice({
  env: extraEnv = {},
  adminUser = process.env.BENCH_ADMIN_USER || 'bench',
  databaseUrl = DATABASE_URL,
  redisUrl = REDIS_URL,
  firstStatement = SMALL_STATEMENT,
  isGood = (res) => isOkJson(res),
} = {}) {
  warnIfStale();
  const prefix = `bench-${randomBytes(6).toString('hex')}`;
  const password = randomBytes(18).toString('base64url');
  const port = await freePort();
  const adminRole = await benchAdminRole(databaseUrl);
  const env = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    SLUICE_JWT_SECRET: randomBytes(24).toString('base64url'), // 32 characters
    SLUICE_ADMIN_USER: adminUser,
    SLUICE_ADMIN_PASSWORD: password,
    SLUICE_ADMIN_ROLE: adminRole,
    SLUICE_CREDENTIAL_KEY: randomBytes(24).toString('base64url'),
    SLUICE_KEY_PREFIX: prefix,
    // The worker's /metrics port (default 9464) may be taken by another worker on this machine.
    SLUICE_WORKER_METRICS_PORT: '0',
    PORT: String(port),
    HOST: '127.0.0.1', // loopback only
    NO_COLOR: '1', // plain log lines in the error report
    ...extraEnv,
  };
  // Registered before the children start, so keys written by a failed start go too.
  onCleanup(async () => {
    const n = await deleteRedisKeys(prefix, redisUrl);
    console.error(`cleanup: deleted ${n} Redis keys with prefix ${prefix}`);
  });
  const worker = startChild('worker', 'dist/apps/worker/src/main.js', env);
  onCleanup(worker.stop);
  const api = startChild('api', 'dist/apps/api/src/main.js', env);
  onCleanup(api.stop);
  const children = [worker, api];

  const baseUrl = `http://127.0.0.1:${port}`;
  await waitForInfo(baseUrl, children);
  const headers = await login(baseUrl, adminUser, password);
  await waitForFirstResult(baseUrl, headers, children, firstStatement, isGood);
  return { baseUrl, headers, worker, api, children, prefix, port, env };
}

/**
 * The role the bench's admin runs as: it may read everything (pg_read_all_data) and create
 * tables in public. DATABASE_URL is the control login here, as a superuser for convenience.
 */
export const BENCH_ADMIN_ROLE = 'sluice_bench_admin';
/** The bench's own NOLOGIN role (made if missing), for its admin and its users. */
export async function benchAdminRole(databaseUrl) {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(`DO $$BEGIN
      IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${BENCH_ADMIN_ROLE}') THEN
        CREATE ROLE ${BENCH_ADMIN_ROLE} NOLOGIN;
      END IF; END$$`);
    await client.query(`GRANT pg_read_all_data TO ${BENCH_ADMIN_ROLE}`);
    await client.query(`GRANT CREATE, USAGE ON SCHEMA public TO ${BENCH_ADMIN_ROLE}`);
  } finally {
    await client.end();
  }
  return BENCH_ADMIN_ROLE;
}

/** Logs in; returns the Authorization header. */
export async function login(baseUrl, username, password) {
  const res = await jsonRequest(new URL('/v1/login', baseUrl), { username, password });
  if (res.status !== 200)
    throw new Error(`login of ${username} failed: HTTP ${res.status} ${res.body}`);
  return { authorization: `Bearer ${JSON.parse(res.body).access_token}` };
}

/** Resolves with what `work` gives, or rejects as soon as a Sluice child dies. */
export function unlessDied(sluice, work) {
  return Promise.race([work, ...sluice.children.map((c) => c.died)]);
}

/**
 * Starts `select * from <table>` as an asynchronous Parquet export on the export lane (202 at
 * once, its result kept) and returns its query id.
 */
export async function startAsyncExport(sluice, table) {
  const accepted = await unlessDied(
    sluice,
    fetch(`${sluice.baseUrl}/v1/execute`, {
      method: 'POST',
      headers: {
        authorization: sluice.headers.authorization,
        'content-type': 'application/json',
        accept: 'application/parquet',
        'accept-encoding': 'identity',
      },
      body: JSON.stringify({
        statement: `select * from ${table}`,
        wait_timeout: 0,
        lane: 'export',
      }),
    }),
  );
  if (accepted.status !== 202)
    throw new Error(`export not accepted: ${accepted.status} ${await accepted.text()}`);
  return (await accepted.json()).query_id;
}

export function printChildOutput(sluice, lines = 15) {
  console.error('\nlast output of the Sluice processes:');
  for (const c of sluice.children)
    console.error(`  [${c.name}]\n    ${c.lines.slice(-lines).join('\n    ')}`);
}

// ---------------------------------------------------------------------------------------------
// Report

export function machineDescription() {
  const cpus = os.cpus();
  const model = cpus[0]?.model.trim() ?? 'unknown CPU';
  const gib = (os.totalmem() / 2 ** 30).toFixed(1);
  return `${cpus.length} × ${model}, ${gib} GiB RAM, Node ${process.version}, ${os.type()} ${os.release()} ${os.arch()}`;
}

export function loadAverage() {
  return os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
}

export function gitDescription() {
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

/** The header lines every report starts with. */
export function reportHeader(title, loadAtStart) {
  return [
    `### ${title} — ${new Date().toISOString()}`,
    '',
    `- Machine: ${machineDescription()}`,
    `- Load average at start: ${loadAtStart}; at end: ${loadAverage()}`,
    `- Code: ${gitDescription()}`,
  ];
}

export const met = (ok) => (ok ? 'met' : '**NOT met**');

// ---------------------------------------------------------------------------------------------
// PostgreSQL round trips

/**
 * A TCP proxy in front of PostgreSQL that counts what clients send: each burst a client writes
 * (one corked batch of protocol messages, a data event on loopback) is one round trip's request.
 * For a phase of its own, never a timed one: the extra hop costs time. `url` is `databaseUrl`
 * with the proxy's port; `sent()` the bursts so far, all connections together.
 */
export async function startCountingProxy(databaseUrl = DATABASE_URL) {
  const upstream = new URL(databaseUrl);
  let bursts = 0;
  const sockets = new Set();
  const server = net.createServer((client) => {
    const server = net.connect(Number(upstream.port || 5432), upstream.hostname);
    for (const s of [client, server]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.on('data', () => (bursts += 1));
    client.pipe(server);
    server.pipe(client);
    client.on('close', () => server.destroy());
    server.on('close', () => client.destroy());
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(server.address().port);
  const stop = () =>
    new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
  onCleanup(stop);
  return { url: url.toString(), sent: () => bursts, stop };
}

/**
 * The environment of bench/skeleton-baseline.mjs's api and worker: their keys under a Redis prefix
 * of their own, deleted at the cleanup.
 */
export function skeletonEnv({ databaseUrl = DATABASE_URL, redisUrl = REDIS_URL } = {}) {
  const id = `bench-skeleton-${randomBytes(6).toString('hex')}`;
  onCleanup(() => deleteRedisKeys(id, redisUrl));
  return {
    ...process.env,
    BENCH_DATABASE_URL: databaseUrl,
    BENCH_REDIS_URL: redisUrl,
    BENCH_SKELETON_PREFIX: `{${id}}`,
  };
}

/** What a child prints once it is ready (the rest of the line after `prefix`, if any). */
export async function printedLine(child, prefix) {
  for (const deadline = Date.now() + START_TIMEOUT_MS; Date.now() < deadline;) {
    const line = child.lines.find((l) => l.startsWith(prefix));
    if (line) return line.slice(prefix.length).trim();
    await Promise.race([sleep(50), child.died]);
  }
  throw new Error(`${child.name} did not start`);
}

/**
 * The architecture's floor (bench/skeleton-baseline.mjs): its worker, then its api, stopped at the
 * cleanup. `consumer`: one of its worker's variants (BENCH_SKELETON_CONSUMER), not the floor.
 */
export async function startSkeleton({
  databaseUrl = DATABASE_URL,
  redisUrl = REDIS_URL,
  consumer,
} = {}) {
  const env = skeletonEnv({ databaseUrl, redisUrl });
  if (consumer) env.BENCH_SKELETON_CONSUMER = consumer;
  const file = 'bench/skeleton-baseline.mjs';
  const name = consumer ? `skeleton (${consumer})` : 'skeleton';
  const worker = startChild(`${name} worker`, file, { ...env, BENCH_SKELETON_ROLE: 'worker' });
  onCleanup(worker.stop);
  await printedLine(worker, 'skeleton worker ready');
  const api = startChild(`${name} api`, file, { ...env, BENCH_SKELETON_ROLE: 'api' });
  onCleanup(api.stop);
  const url = await printedLine(api, 'skeleton api on ');
  return { url, worker, api, children: [worker, api] };
}

/**
 * Makes `table` with `createStatement` (then VACUUM ANALYZE) unless it is there, a stored table a
 * bench reads its rows from; drops it at the cleanup unless `keep` (a later run reuses it).
 */
export async function storedTable(
  table,
  createStatement,
  { keep = false, databaseUrl = DATABASE_URL } = {},
) {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const exists = await client.query('select to_regclass($1) as t', [table]);
    if (exists.rows[0].t === null) {
      console.error(`creating ${table} …`);
      await client.query(createStatement);
      await client.query(`vacuum analyze ${table}`);
    }
  } finally {
    await client.end();
  }
  if (!keep)
    onCleanup(async () => {
      const c = new pg.Client({ connectionString: databaseUrl });
      await c.connect();
      await c.query(`drop table if exists ${table}`).finally(() => c.end());
    });
}
