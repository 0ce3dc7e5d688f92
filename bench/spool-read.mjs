// Where the CPU goes when a spooled kept result is read (issue 42's two read goals), measured in
// rounds on one export so that builds and ways of reading compare on the same machine state.
// One Parquet export of BENCH_ROWS rows is spooled to s3rver (as bench/spool.mjs does), then each
// round reads it every way, in turn, and takes each process's on-CPU time (schedstat, all
// threads) over each read:
//
// - store: the segments straight from the store by their presigned URLs, one after the other
//   (spool.mjs's floor for the fetch through the api);
// - store ×4: the same, four segments at once, drained (no client code: the store's own floor for
//   parallel downloads);
// - api: GET …/result through the api;
// - seg ×4, seg ×1: SluiceClient.result by presigned segments, 4 at once and one at a time,
//   written to a file in order (as `sluice export` does).
//
// With BENCH_BASE_DIST=.dist-base (a copy of another build's dist/ inside the repository, where
// node_modules is found), a second api of that build reads the same result ('api base'), and the
// client of that build reads the segments too ('seg ×4 base', 'seg ×1 base'): the two builds in
// every round, back to back.
//
//   npm run build && BENCH_ROUNDS=5 node bench/spool-read.mjs
//
// BENCH_ROWS (5,000,000; its table is kept, as BENCH_KEEP_TABLE=1 keeps spool.mjs's),
// BENCH_ROUNDS (5), BENCH_MODES (a comma-separated subset of the names above).
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ROOT,
  envInt,
  freePort,
  installGuards,
  loadAverage,
  onCleanup,
  reportHeader,
  requireDist,
  runMain,
  startChild,
  startSluice,
  storedTable,
  startAsyncExport,
  unlessDied,
} from './lib/service.mjs';
import { createStoredTable } from './lib/exports.mjs';

const ROWS = envInt('BENCH_ROWS', 5_000_000);
const ROUNDS = envInt('BENCH_ROUNDS', 5);
const BASE_DIST = process.env.BENCH_BASE_DIST;
const BUCKET = 'sluice-bench-spool';
const TABLE = `bench_spool_${ROWS}`;
const CREATE_TABLE = createStoredTable(TABLE, ROWS);

const S3RVER = `
  const S3rver = require('s3rver');
  const [directory, bucket] = process.argv.slice(1);
  new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] })
    .run()
    .then(({ port }) => process.stdout.write(JSON.stringify({ port }) + '\\n'));`;

async function startS3() {
  const directory = fs.mkdtempSync(path.join(tmpdir(), 'sluice-bench-s3-'));
  const child = spawn(process.execPath, ['-e', S3RVER, directory, BUCKET], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  onCleanup(async () => {
    child.kill('SIGTERM');
    fs.rmSync(directory, { recursive: true, force: true });
  });
  const [line] = await once(child.stdout, 'data');
  const { port } = JSON.parse(line.toString());
  return { endpoint: `http://127.0.0.1:${port}`, pid: child.pid };
}

/** On-CPU nanoseconds of a process, all its threads (schedstat's first field). */
function cpuNs(pid) {
  let sum = 0;
  try {
    for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
      try {
        sum += Number(fs.readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        // the thread ended meanwhile
      }
    }
  } catch {
    return NaN;
  }
  return sum;
}

/** User and system CPU seconds of a process (its stat's utime and stime, all threads). */
function userSys(pid) {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return { user: Number(fields[11]) / 100, sys: Number(fields[12]) / 100 };
  } catch {
    return { user: NaN, sys: NaN };
  }
}

function machineBusy() {
  const v = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9);
  const n = v.map(Number);
  const idle = n[3] + n[4];
  return { busy: n.reduce((a, b) => a + b, 0) - idle, total: n.reduce((a, b) => a + b, 0) };
}

async function drain(body) {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of body) {
    hash.update(chunk);
    bytes += chunk.byteLength;
  }
  return { bytes, sha: hash.digest('hex') };
}

async function toFile(body, file) {
  const hash = createHash('sha256');
  const out = fs.createWriteStream(file);
  let bytes = 0;
  for await (const chunk of body) {
    hash.update(chunk);
    bytes += chunk.byteLength;
    if (!out.write(chunk)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  fs.rmSync(file);
  return { bytes, sha: hash.digest('hex') };
}

async function main() {
  installGuards(envInt('BENCH_HARD_LIMIT_SECONDS', 1500) * 1000);
  const loadAtStart = loadAverage();
  const { SluiceClient } = requireDist('libs/client/src/index.js');
  const BaseClient = BASE_DIST
    ? createRequire(import.meta.url)(path.join(ROOT, BASE_DIST, 'libs/client/src/index.js'))
        .SluiceClient
    : undefined;
  await storedTable(TABLE, CREATE_TABLE, { keep: true });
  const s3 = await startS3();
  const sluice = await startSluice({
    env: {
      SLUICE_SPOOL_URL: `s3://${BUCKET}/bench-${randomBytes(4).toString('hex')}`,
      SLUICE_SPOOL_S3_ENDPOINT: s3.endpoint,
      SLUICE_SPOOL_PRESIGN_SECONDS: '3600',
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
      AWS_REGION: 'us-east-1',
    },
  });
  const { baseUrl } = sluice;
  const auth = sluice.headers.authorization;
  const work = fs.mkdtempSync(path.join(tmpdir(), 'sluice-bench-spool-read-'));
  onCleanup(() => fs.rmSync(work, { recursive: true, force: true }));

  const queryId = await startAsyncExport(sluice, TABLE);
  for (;;) {
    const info = await (
      await fetch(`${baseUrl}/v1/queries/${queryId}`, { headers: { authorization: auth } })
    ).json();
    if (info.state === 'succeeded') break;
    if (['failed', 'cancelled'].includes(info.state)) throw new Error(`export ${info.state}`);
    await unlessDied(sluice, sleep(200));
  }
  const manifest = await (
    await fetch(`${baseUrl}/v1/queries/${queryId}/result/segments`, {
      headers: { authorization: auth },
    })
  ).json();

  let baseApi;
  if (BASE_DIST) {
    const port = String(await freePort());
    baseApi = startChild('api-base', `${BASE_DIST}/apps/api/src/main.js`, {
      ...sluice.env,
      PORT: port,
    });
    onCleanup(baseApi.stop);
    baseApi.url = `http://127.0.0.1:${port}`;
    for (const deadline = Date.now() + 60_000; ;) {
      const up = await fetch(`${baseApi.url}/v1/info`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (up) break;
      if (Date.now() > deadline)
        throw new Error(`api-base did not start: ${baseApi.lines.join('\n')}`);
      await sleep(200);
    }
  }

  const viaApi = (url) => async () =>
    drain(
      (
        await fetch(`${url}/v1/queries/${queryId}/result`, {
          headers: { authorization: auth, 'accept-encoding': 'identity' },
        })
      ).body,
    );
  const storeParallel = (n) => async () => {
    const hashes = [];
    let bytes = 0;
    let next = 0;
    const one = async () => {
      for (let i = next++; i < manifest.segments.length; i = next++) {
        const r = await drain((await fetch(manifest.segments[i].url)).body);
        bytes += r.bytes;
        hashes[i] = r.sha;
      }
    };
    await Promise.all(Array.from({ length: n }, one));
    return { bytes, sha: n === 1 ? undefined : hashes.join('') };
  };
  const storeOne = async () => {
    const hash = createHash('sha256');
    let bytes = 0;
    for (const segment of manifest.segments) {
      for await (const chunk of (await fetch(segment.url)).body) {
        hash.update(chunk);
        bytes += chunk.byteLength;
      }
    }
    return { bytes, sha: hash.digest('hex') };
  };
  const segments = (Client, parallel) => async () => {
    const client = new Client({
      url: baseUrl,
      credentials: { token: auth.slice('Bearer '.length) },
    });
    const result = await client.result(queryId, { segmentDownloads: parallel });
    if (result.source !== 'segments') throw new Error(`read through the ${result.source}`);
    return toFile(result.body, path.join(work, `segments-${parallel}`));
  };
  const modes = {
    store: storeOne,
    'store x4': storeParallel(4),
    api: viaApi(baseUrl),
    ...(baseApi ? { 'api base': viaApi(baseApi.url) } : {}),
    'seg x4': segments(SluiceClient, 4),
    ...(BaseClient ? { 'seg x4 base': segments(BaseClient, 4) } : {}),
    'seg x1': segments(SluiceClient, 1),
    ...(BaseClient ? { 'seg x1 base': segments(BaseClient, 1) } : {}),
  };
  const only = process.env.BENCH_MODES?.split(',').map((s) => s.trim());
  const names = Object.keys(modes).filter((m) => !only || only.includes(m));
  const pids = { client: process.pid, api: sluice.api.pid, s3rver: s3.pid };
  if (baseApi) pids['api base'] = baseApi.pid;
  const runs = Object.fromEntries(names.map((n) => [n, []]));
  let whole;
  console.error(`reading: ${JSON.stringify(pids)}`);
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of names) {
      const before = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, cpuNs(p)]));
      const ticks = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, userSys(p)]));
      const machine = machineBusy();
      const t0 = performance.now();
      const r = await modes[name]();
      const seconds = (performance.now() - t0) / 1000;
      const after = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, cpuNs(p)]));
      const m2 = machineBusy();
      const ticks2 = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, userSys(p)]));
      if (r.bytes !== manifest.size)
        throw new Error(`${name}: ${r.bytes} bytes of ${manifest.size}`);
      if (r.sha && !name.startsWith('store x')) {
        whole ??= r.sha;
        if (r.sha !== whole) throw new Error(`${name}: different bytes`);
      }
      const cpu = Object.fromEntries(
        Object.keys(pids).map((k) => [k, (after[k] - before[k]) / 1e9]),
      );
      const busy = ((m2.busy - machine.busy) / (m2.total - machine.total)) * 2;
      const split = Object.fromEntries(
        Object.keys(pids).map((k) => [
          k,
          { user: ticks2[k].user - ticks[k].user, sys: ticks2[k].sys - ticks[k].sys },
        ]),
      );
      runs[name].push({ seconds, cpu, busy, split });
      console.error(
        `round ${round + 1} ${name.padEnd(12)} ${(r.bytes / 2 ** 20 / seconds).toFixed(0).padStart(4)} MiB/s ${seconds.toFixed(2)} s  cpu-s ${Object.entries(
          cpu,
        )
          .map(([k, v]) => `${k} ${v.toFixed(2)}`)
          .join(', ')}  machine ${(busy * 100).toFixed(0)}%`,
      );
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const mib = manifest.size / 2 ** 20;
  console.log(
    reportHeader(
      `Reading a spooled result (bench/spool-read.mjs, ${ROWS.toLocaleString('en-US')} rows, ${mib.toFixed(1)} MiB in ${manifest.segments.length} segments, ${ROUNDS} rounds)`,
      loadAtStart,
    ).join('\n'),
  );
  console.log('');
  console.log(
    `| way | MiB/s (median) | s | ${Object.keys(pids)
      .map((k) => `${k} CPU-s`)
      .join(' | ')} | machine busy |`,
  );
  console.log(
    `|---|---:|---:|${Object.keys(pids)
      .map(() => '---:')
      .join('|')}|---:|`,
  );
  for (const name of names) {
    const rs = runs[name];
    const s = median(rs.map((r) => r.seconds));
    console.log(
      `| ${name} | ${(mib / s).toFixed(0)} | ${s.toFixed(2)} | ${Object.keys(pids)
        .map((k) => median(rs.map((r) => r.cpu[k])).toFixed(2))
        .join(' | ')} | ${(median(rs.map((r) => r.busy)) * 100).toFixed(0)}% |`,
    );
  }
  console.log('');
  console.log('User + system CPU seconds per read, mean over the rounds (10 ms ticks):');
  for (const name of names) {
    const rs = runs[name];
    const mean = (f) => rs.reduce((a, r) => a + f(r), 0) / rs.length;
    console.log(
      `- ${name}: ${Object.keys(pids)
        .map(
          (k) =>
            `${k} ${mean((r) => r.split[k].user).toFixed(2)} + ${mean((r) => r.split[k].sys).toFixed(2)}`,
        )
        .join(', ')}`,
    );
  }
}

await runMain(main);
