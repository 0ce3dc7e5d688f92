// Kept results spooled to an S3-compatible store (issue 42): an asynchronous Parquet export of
// BENCH_ROWS rows (5,000,000 by default) from a stored table, spooled to s3rver (the registry
// package the e2e suite runs, started here in a process of its own), then its result read every
// way a client may. One run, each figure printed beside its goal and its floor:
//
// - the export: Redis `used_memory` growth (the whole server's: other runs on a shared Redis show
//   in it too), api and worker peak RSS, sampled every 100 ms;
// - fetch through the api (GET …/result) against the floor of reading the same segments straight
//   from the store by their presigned URLs, one after the other, in this process (both hashed as
//   they come), beside the same segments through a relay with nothing of Sluice's in it
//   (bench/lib/relay-server.mjs): what a hop costs here before the api does anything;
// - the client's download of the finished result by its presigned segments (SluiceClient.result,
//   the code `sluice export --keep` reads with), 4 at once against one at a time, both written to
//   a file as the command writes it (each segment at its offset as its download ends, the
//   command's writeAtOffsets; the file is hashed after the clock stops, as the command hashes
//   nothing), beside the floor
//   of that ratio here: the same segments by the same URLs, each written into one file at its
//   offset as it comes, with no Sluice code, 4 at once against one at a time;
//
// Each of these is read BENCH_READ_ROUNDS times (3), its ways alternated (A B C, C B A, A B C
// for the fetches; A B, B A, A B for the downloads), and the median of each way is the figure:
// on a 2-core machine shared with others, one read of ~1 s each says more about the neighbours
// than about the ways.
// - a fetch cut at a byte (curl piped to `head -c N`) and resumed with `curl --continue-at -`:
//   the file must be identical, for a byte inside a segment, at a segment's end and near the end;
// - the result read whole from a second api process, and from the first after a restart.
//
//   npm run build && node bench/spool.mjs
//
// BENCH_ROWS: rows of the table (made in the set-up, dropped at the end unless BENCH_KEEP_TABLE=1).
// BENCH_S3_DIR: where s3rver keeps its objects (default: a temporary directory, removed at the end).
// Needs curl. Everything it starts (processes, Redis keys, the table, files) is removed at the end,
// also on error, on Ctrl-C and at the hard time limit (BENCH_HARD_LIMIT_SECONDS, 1500).
import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { Redis } from 'ioredis';
import {
  DATABASE_URL,
  REDIS_URL,
  ROOT,
  cpuLine,
  cpuPercent,
  cpuSnapshot,
  envInt,
  freePort,
  installGuards,
  loadAverage,
  mb,
  met,
  onCleanup,
  redisUsedMemory,
  reportHeader,
  requireDist,
  runMain,
  sampleRss,
  startChild,
  startAsyncExport,
  startSluice,
  unlessDied,
  storedTable,
} from './lib/service.mjs';
import { createStoredTable } from './lib/exports.mjs';

const ROWS = envInt('BENCH_ROWS', 5_000_000);
const KEEP_TABLE = process.env.BENCH_KEEP_TABLE === '1';
const READ_ROUNDS = envInt('BENCH_READ_ROUNDS', 3);
const HARD_LIMIT_MS = envInt('BENCH_HARD_LIMIT_SECONDS', 1500) * 1000;
const BUCKET = 'sluice-bench-spool';

// The issue's goals.
const GOAL_REDIS_GROWTH = 20 * 2 ** 20;
const GOAL_API_RSS = 250 * 2 ** 20;
const GOAL_WORKER_RSS = 300 * 2 ** 20;
const GOAL_API_VS_STORE = 0.8;
const GOAL_PARALLEL_VS_ONE = 1.5;

/** The stored table: issue 39's mix (bench/large-result.mjs), its last column 95% NULL. */
const TABLE = `bench_spool_${ROWS}`;
const CREATE_TABLE = createStoredTable(TABLE, ROWS);

async function setUpTable() {
  await storedTable(TABLE, CREATE_TABLE, { keep: KEEP_TABLE });
}

/** s3rver in a process of its own (as test/support/s3.server.ts runs it), with one bucket. */
const S3RVER = `
  const S3rver = require('s3rver');
  const Store = require('s3rver/lib/stores/filesystem');
  const deleteObject = Store.prototype.deleteObject;
  let deletes = Promise.resolve();
  Store.prototype.deleteObject = function (...args) {
    const next = deletes.then(() => deleteObject.apply(this, args));
    deletes = next.catch(() => undefined);
    return next;
  };
  const [directory, bucket] = process.argv.slice(1);
  new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] })
    .run()
    .then(({ port }) => process.stdout.write(JSON.stringify({ port }) + '\\n'));`;

/**
 * A node process of its own (`args` after the node binary) that prints `{"port": n}` once it
 * listens on loopback; killed at the cleanup. Its port and pid.
 */
async function listening(args) {
  const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  onCleanup(() => child.kill('SIGTERM'));
  const [line] = await once(child.stdout, 'data');
  return { port: JSON.parse(line.toString()).port, pid: child.pid };
}

async function startS3() {
  const directory =
    process.env.BENCH_S3_DIR || fs.mkdtempSync(path.join(tmpdir(), 'sluice-bench-s3-'));
  if (!process.env.BENCH_S3_DIR) {
    onCleanup(() => fs.rmSync(directory, { recursive: true, force: true }));
  }
  const { port, pid } = await listening(['-e', S3RVER, directory, BUCKET]);
  return { endpoint: `http://127.0.0.1:${port}`, pid };
}

/** bench/lib/relay-server.mjs over the manifest's presigned segments. */
async function startRelay(manifest) {
  const urls = JSON.stringify(manifest.segments.map((s) => s.url));
  const relay = path.join(ROOT, 'bench/lib/relay-server.mjs');
  const { port, pid } = await listening([relay, urls, String(manifest.size)]);
  return { url: `http://127.0.0.1:${port}/`, pid };
}

/** Reads a response body to its end: bytes, seconds, SHA-256. */
async function drain(body) {
  const hash = createHash('sha256');
  let bytes = 0;
  const started = performance.now();
  for await (const chunk of body) {
    hash.update(chunk);
    bytes += chunk.byteLength;
  }
  return { bytes, seconds: (performance.now() - started) / 1000, sha: hash.digest('hex') };
}

/** The median of each way's runs (by rate), and the CPU of all its runs together. */
function medianRun(runs) {
  const sorted = [...runs].sort((a, b) => a.seconds - b.seconds);
  return sorted[Math.floor(sorted.length / 2)];
}

/** Per group, % of one core over several windows (the sum of their ticks over their time). */
function cpuOfRuns(windows) {
  const out = {};
  const seconds = windows.reduce((a, w) => a + w.seconds, 0);
  for (const w of windows)
    for (const [k, v] of Object.entries(w.cpu)) out[k] = (out[k] ?? 0) + (v * w.seconds) / seconds;
  return out;
}

const mibs = (r) => (r.bytes / 2 ** 20 / r.seconds).toFixed(0);
const rate = (r) =>
  `${(r.bytes / 2 ** 20 / r.seconds).toFixed(1)} MiB/s (${r.seconds.toFixed(2)} s)`;
const sha256File = (file) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

async function main() {
  installGuards(HARD_LIMIT_MS);
  const loadAtStart = loadAverage();
  const { SluiceClient } = requireDist('libs/client/src/index.js');
  const { writeAtOffsets } = requireDist('apps/cli/src/client.commands.js');
  await setUpTable();
  const s3 = await startS3();
  const spoolPrefix = `bench-${randomBytes(4).toString('hex')}`;
  const spoolEnv = {
    SLUICE_SPOOL_URL: `s3://${BUCKET}/${spoolPrefix}`,
    SLUICE_SPOOL_S3_ENDPOINT: s3.endpoint,
    SLUICE_SPOOL_PRESIGN_SECONDS: '3600',
    AWS_ACCESS_KEY_ID: 'S3RVER',
    AWS_SECRET_ACCESS_KEY: 'S3RVER',
    AWS_REGION: 'us-east-1',
  };
  const sluice = await startSluice({ env: spoolEnv });
  const { baseUrl, headers } = sluice;
  const auth = headers.authorization;
  const work = fs.mkdtempSync(path.join(tmpdir(), 'sluice-bench-spool-'));
  onCleanup(() => fs.rmSync(work, { recursive: true, force: true }));
  const lines = [];
  const print = (line) => {
    console.log(line);
    lines.push(line);
  };

  // 1. The export: Redis, api and worker memory while it runs.
  const redis = new Redis(REDIS_URL);
  onCleanup(() => redis.disconnect());
  const redisBefore = await redisUsedMemory(redis);
  let redisPeak = redisBefore;
  const redisSampler = setInterval(() => {
    redisUsedMemory(redis).then(
      (v) => (redisPeak = Math.max(redisPeak, v)),
      () => undefined,
    );
  }, 100);
  const rss = sampleRss([sluice.api.pid, sluice.worker.pid]);
  const started = performance.now();
  const queryId = await startAsyncExport(sluice, TABLE);
  let info;
  for (;;) {
    info = await (
      await fetch(`${baseUrl}/v1/queries/${queryId}`, { headers: { authorization: auth } })
    ).json();
    if (['succeeded', 'failed', 'cancelled'].includes(info.state)) break;
    await unlessDied(sluice, sleep(200));
  }
  const exportSeconds = (performance.now() - started) / 1000;
  clearInterval(redisSampler);
  const memory = rss.stop();
  if (info.state !== 'succeeded')
    throw new Error(`export ${info.state}: ${JSON.stringify(info.status)}`);
  const manifest = await (
    await fetch(`${baseUrl}/v1/queries/${queryId}/result/segments`, {
      headers: { authorization: auth },
    })
  ).json();
  const redisGrowth = redisPeak - redisBefore;
  const apiPeak = memory[sluice.api.pid].peak;
  const workerPeak = memory[sluice.worker.pid].peak;

  // 2. Through the api against straight from the store, one stream each, and through a relay with
  // nothing of Sluice's in it (the floor of the api's hop), alternated. Where the CPU goes in each
  // (a 2-core machine: the store, the api or the relay, and this client share it).
  const relay = await startRelay(manifest);
  const cpuGroups = {
    'bench client': [process.pid],
    api: [sluice.api.pid],
    relay: [relay.pid],
    s3rver: [s3.pid],
  };
  const timed = async (read) => {
    const before = cpuSnapshot(cpuGroups);
    const run = await read();
    return { ...run, cpu: cpuPercent(before, cpuSnapshot(cpuGroups)) };
  };
  const readViaApi = async () =>
    drain(
      (
        await fetch(`${baseUrl}/v1/queries/${queryId}/result`, {
          headers: { authorization: auth, 'accept-encoding': 'identity' },
        })
      ).body,
    );
  const readFromStore = async () => {
    const storeHash = createHash('sha256');
    let storeBytes = 0;
    const storeStarted = performance.now();
    for (const segment of manifest.segments) {
      for await (const chunk of (await fetch(segment.url)).body) {
        storeHash.update(chunk);
        storeBytes += chunk.byteLength;
      }
    }
    return {
      bytes: storeBytes,
      seconds: (performance.now() - storeStarted) / 1000,
      sha: storeHash.digest('hex'),
    };
  };
  const readViaRelay = async () => drain((await fetch(relay.url)).body);
  const apiRuns = [];
  const storeRuns = [];
  const relayRuns = [];
  const ways = {
    api: [readViaApi, apiRuns],
    store: [readFromStore, storeRuns],
    relay: [readViaRelay, relayRuns],
  };
  for (let round = 0; round < READ_ROUNDS; round++) {
    const order = round % 2 === 0 ? ['api', 'store', 'relay'] : ['relay', 'store', 'api'];
    for (const way of order) {
      const [read, runs] = ways[way];
      runs.push(await timed(read));
    }
  }
  const viaApi = medianRun(apiRuns);
  const fromStore = medianRun(storeRuns);
  const viaRelay = medianRun(relayRuns);
  const cpu = {
    viaApi: cpuOfRuns(apiRuns),
    fromStore: cpuOfRuns(storeRuns),
    viaRelay: cpuOfRuns(relayRuns),
  };
  const whole = apiRuns[0].sha;

  // 3. The client's download by presigned segments: 4 at once, one at a time, alternated.
  const client = new SluiceClient({
    url: baseUrl,
    credentials: { token: auth.slice('Bearer '.length) },
  });
  const downloadRuns = { 4: [], 1: [] };
  for (let round = 0; round < READ_ROUNDS; round++) {
    for (const parallel of round % 2 === 0 ? [4, 1] : [1, 4]) {
      const file = path.join(work, `segments-${parallel}.parquet`);
      const run = await timed(async () => {
        const started = performance.now();
        const result = await client.result(queryId, { segmentDownloads: parallel });
        if (result.source !== 'segments')
          throw new Error(`result() read through the ${result.source}`);
        // As `sluice export` writes a file: each segment at its offset as its download ends.
        let bytes = 0;
        await writeAtOffsets(result.segments, file, (n) => (bytes += n));
        const seconds = (performance.now() - started) / 1000;
        return { bytes, seconds, sha: sha256File(file) };
      });
      downloadRuns[parallel].push(run);
      fs.rmSync(file);
    }
  }
  const downloads = { 4: medianRun(downloadRuns[4]), 1: medianRun(downloadRuns[1]) };
  cpu.segments4 = cpuOfRuns(downloadRuns[4]);
  cpu.segments1 = cpuOfRuns(downloadRuns[1]);

  // 3b. The floor of that ratio on this machine, in the same minutes: the same segments from the
  // store by the same URLs, each written into one file at its offset as it comes, with no Sluice
  // code (the least a downloader that writes the file does; bench/spool-floor.mjs's "file" ways).
  const writeSegments = async (parallel, file) => {
    const started = performance.now();
    fs.closeSync(fs.openSync(file, 'w'));
    let next = 0;
    await Promise.all(
      Array.from({ length: parallel }, async () => {
        for (let i = next++; i < manifest.segments.length; i = next++) {
          const { url: segmentUrl, offset } = manifest.segments[i];
          const res = await fetch(segmentUrl);
          if (!res.ok) throw new Error(`segment ${i + 1}: HTTP ${res.status} from the store`);
          const to = fs.createWriteStream(file, { flags: 'r+', start: offset });
          await pipeline(Readable.fromWeb(res.body), to);
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    return { bytes: fs.statSync(file).size, seconds, sha: sha256File(file) };
  };
  const floorRuns = { 4: [], 1: [] };
  for (let round = 0; round < READ_ROUNDS; round++) {
    for (const parallel of round % 2 === 0 ? [4, 1] : [1, 4]) {
      const file = path.join(work, `floor-${parallel}.parquet`);
      floorRuns[parallel].push(await timed(() => writeSegments(parallel, file)));
      fs.rmSync(file);
    }
  }
  const floors = { 4: medianRun(floorRuns[4]), 1: medianRun(floorRuns[1]) };
  cpu.floor4 = cpuOfRuns(floorRuns[4]);
  cpu.floor1 = cpuOfRuns(floorRuns[1]);
  const allSame = [
    ...apiRuns,
    ...storeRuns,
    ...relayRuns,
    ...downloadRuns[4],
    ...downloadRuns[1],
    ...floorRuns[4],
    ...floorRuns[1],
  ].every((r) => r.sha === whole && r.bytes === manifest.size);

  // 4. Cut with curl at a byte, resumed with --continue-at -.
  const url = `${baseUrl}/v1/queries/${queryId}/result`;
  const first = manifest.segments[0].size;
  // Inside a segment, at its end, near the result's end: each short of the whole (a result of
  // one segment ends at its end, and a cut there would be the whole file, which a resume's range
  // past its end is refused for, 416).
  const cuts = [...new Set([Math.floor(first / 2) + 13, first, manifest.size - 1000])].filter(
    (at) => at > 0 && at < manifest.size,
  );
  const resumed = [];
  for (const at of cuts) {
    const file = path.join(work, 'cut.parquet');
    execFileSync(
      'sh',
      ['-c', `curl -s -H "authorization: $AUTH" "$URL" 2>/dev/null | head -c ${at} > "$FILE"`],
      {
        env: { ...process.env, AUTH: auth, URL: url, FILE: file },
      },
    );
    const cutAt = fs.statSync(file).size;
    execFileSync('curl', [
      '-sS',
      '--fail',
      '--continue-at',
      '-',
      '-H',
      `authorization: ${auth}`,
      '-o',
      file,
      url,
    ]);
    resumed.push({ at: cutAt, same: sha256File(file) === whole });
    fs.rmSync(file);
  }

  // 5. Another api process, and the first after a restart.
  const port2 = String(await freePort());
  const api2 = startChild('api-2', 'dist/apps/api/src/main.js', { ...sluice.env, PORT: port2 });
  onCleanup(api2.stop);
  const other = await readWhenUp(`http://127.0.0.1:${port2}`, queryId, auth, api2);
  await api2.stop();
  await sluice.api.stop();
  const restarted = startChild('api', 'dist/apps/api/src/main.js', sluice.env);
  onCleanup(restarted.stop);
  const again = await readWhenUp(baseUrl, queryId, auth, restarted);
  await fetch(`${baseUrl}/v1/queries/${queryId}`, {
    method: 'DELETE',
    headers: { authorization: auth },
  });

  const apiVsStore = viaApi.bytes / viaApi.seconds / (fromStore.bytes / fromStore.seconds);
  const relayVsStore = viaRelay.bytes / viaRelay.seconds / (fromStore.bytes / fromStore.seconds);
  const ratioOf = (pair) => pair[4].bytes / pair[4].seconds / (pair[1].bytes / pair[1].seconds);
  const parallelVsOne = ratioOf(downloads);
  const floorParallelVsOne = ratioOf(floors);
  const same = (r) =>
    r.sha === whole && r.bytes === manifest.size ? 'identical' : '**DIFFERENT**';
  for (const line of [
    ...reportHeader(
      `Spooled kept results (bench/spool.mjs, ${ROWS.toLocaleString('en-US')} rows)`,
      loadAtStart,
    ),
    `- Settings: defaults (SLUICE_SPOOL_SEGMENT_BYTES 16 MiB), spool s3rver at ${s3.endpoint}, presigned URLs 3600 s; Redis shared with other runs (its used_memory is the whole server's); each read way ${READ_ROUNDS} times, alternated, medians`,
    '',
    `Export (Parquet, zstd, export lane): ${exportSeconds.toFixed(1)} s, ${mb(manifest.size)} MiB in ${manifest.segments.length} segments, ${info.rows_produced ?? info.rows} rows`,
    '',
    '| Goal | Figure | Floor / bound | |',
    '|---|---|---|---|',
    `| Redis used_memory growth during the export | ${mb(redisGrowth)} MiB | < 20 MiB | ${met(redisGrowth < GOAL_REDIS_GROWTH)} |`,
    `| api peak RSS | ${mb(apiPeak)} MiB | < 250 MiB | ${met(apiPeak < GOAL_API_RSS)} |`,
    `| worker peak RSS | ${mb(workerPeak)} MiB | < 300 MiB | ${met(workerPeak < GOAL_WORKER_RSS)} |`,
    `| fetch through the api vs the store | ${rate(viaApi)} = ${apiVsStore.toFixed(2)}x | store, one stream: ${rate(fromStore)}; a relay with no Sluice code, same segments: ${rate(viaRelay)} = ${relayVsStore.toFixed(2)}x the store; ≥ 0.8x | ${met(apiVsStore >= GOAL_API_VS_STORE)} |`,
    `| client download by presigned segments, 4 at once vs 1 | ${rate(downloads[4])} = ${parallelVsOne.toFixed(2)}x | one at a time: ${rate(downloads[1])}; a file writer with no Sluice code, same segments: 4 at once ${rate(floors[4])} = ${floorParallelVsOne.toFixed(2)}x one at a time (${rate(floors[1])}); ≥ 1.5x | ${met(parallelVsOne >= GOAL_PARALLEL_VS_ONE)} |`,
    `| cut and resumed with curl --continue-at - | ${resumed.map((r) => `at ${r.at}: ${r.same ? 'identical' : '**DIFFERENT**'}`).join(', ')} | identical | ${met(resumed.every((r) => r.same))} |`,
    `| read from another api process | ${same(other)} | identical | ${met(other.sha === whole)} |`,
    `| read after an api restart | ${same(again)} | identical | ${met(again.sha === whole)} |`,
    '',
    `Bytes: through the api ${same(viaApi)}, from the store ${same(fromStore)}, through the relay ${same(viaRelay)}, 4 at once ${same(downloads[4])}, one at a time ${same(downloads[1])}, the file writer's ${same(floors[4])} and ${same(floors[1])}; every run ${allSame ? 'identical' : '**DIFFERENT**'}.`,
    `Runs (MiB/s): through the api ${apiRuns.map(mibs).join(', ')}; from the store ${storeRuns.map(mibs).join(', ')}; through the relay ${relayRuns.map(mibs).join(', ')}; 4 at once ${downloadRuns[4].map(mibs).join(', ')}; one at a time ${downloadRuns[1].map(mibs).join(', ')}; the file writer 4 at once ${floorRuns[4].map(mibs).join(', ')}, one at a time ${floorRuns[1].map(mibs).join(', ')}.`,
    '',
    'CPU while each was read, all its runs (100% = one core):',
    `- through the api: ${cpuLine(cpu.viaApi)}`,
    `- from the store, one stream: ${cpuLine(cpu.fromStore)}`,
    `- through the relay with no Sluice code: ${cpuLine(cpu.viaRelay)}`,
    `- presigned segments, 4 at once: ${cpuLine(cpu.segments4)}`,
    `- presigned segments, one at a time: ${cpuLine(cpu.segments1)}`,
    `- the file writer, 4 at once: ${cpuLine(cpu.floor4)}`,
    `- the file writer, one at a time: ${cpuLine(cpu.floor1)}`,
  ])
    print(line);
}

/** Waits for an api to answer, then reads the result whole through it. */
async function readWhenUp(baseUrl, queryId, auth, child) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const res = await fetch(`${baseUrl}/v1/info`);
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline)
      throw new Error(`${child.name} did not start:\n${child.lines.join('\n')}`);
    await Promise.race([sleep(200), child.died]);
  }
  const res = await fetch(`${baseUrl}/v1/queries/${queryId}/result`, {
    headers: { authorization: auth, 'accept-encoding': 'identity' },
  });
  if (res.status !== 200) throw new Error(`${child.name}: HTTP ${res.status} ${await res.text()}`);
  return drain(res.body);
}

await runMain(main);
