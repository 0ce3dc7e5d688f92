// A slow client on a large result (issue 3): 5M rows of mixed types asked for as stream+json and read
// at 2 MiB/s (the response is paused and resumed on a timer, so TCP pushes back on the api) for a
// fixed time, then dropped. Memory must stay flat: the api's RSS and the Redis memory of the query's
// stream (`MEMORY USAGE <prefix>:q:{<id>}:out`, sampled every second with XLEN). Run by hand:
//
//   npm run build && node bench/slow-reader.mjs
//
// Bounded in time (BENCH_SECONDS of reading, plus start-up and a hard limit). Everything it starts
// (child processes, Redis keys) is removed at the end, also on error and on Ctrl-C.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  DATABASE_URL,
  REDIS_URL,
  cpuLine,
  cpuPercent,
  cpuSnapshot,
  envInt,
  installGuards,
  loadAverage,
  mb,
  met,
  onCleanup,
  printChildOutput,
  reportHeader,
  request,
  rssBytes,
  runMain,
  sampleRss,
  sluiceCpuGroups,
  staleBuildWarning,
  startSluice,
  unlessDied,
  executeRequest,
} from './lib/service.mjs';

const ROWS = envInt('BENCH_ROWS', 5_000_000);
const SECONDS = envInt('BENCH_SECONDS', 60);
const RATE = envInt('BENCH_RATE_BYTES', 2 * 2 ** 20); // bytes per second
const ACCEPT = process.env.BENCH_ACCEPT || 'application/stream+json';
const GOAL_API_MB = 150;
const GOAL_STREAM_MB = 32;

installGuards((SECONDS + 120) * 1000);

const SQL =
  `select g::int as i, (g::bigint * 1000003) as b, (g / 7.0)::numeric(20,6) as n, md5(g::text) as t, ` +
  `timestamptz '2024-01-01' + g * interval '1 second' as ts, (g % 2 = 0) as flag, ` +
  `jsonb_build_object('g', g, 'h', md5(g::text)) as j, g / 3.0::float8 as f, ` +
  `case when g % 100 = 0 then g end as sparse from generate_series(1, ${ROWS}) g`;

/**
 * Starts the request and reads at `rate` bytes/s: after each chunk, if the reader is ahead of the
 * schedule, the response is paused until the schedule catches up.
 */
function slowRead(sluice) {
  const body = Buffer.from(JSON.stringify({ statement: SQL }));
  let res;
  let bytes = 0;
  let started;
  let resolveHeaders;
  let rejectHeaders;
  const headers = new Promise((resolve, reject) => {
    resolveHeaders = resolve;
    rejectHeaders = reject;
  });
  let ended = false;
  const req = executeRequest(sluice, body, ACCEPT, (r) => {
    res = r;
    started = performance.now();
    resolveHeaders({ status: r.statusCode, queryId: r.headers['x-query-id'] });
    r.on('data', (c) => {
      bytes += c.length;
      const due = started + (bytes / RATE) * 1000;
      const wait = due - performance.now();
      if (wait > 1) {
        r.pause();
        setTimeout(() => r.resume(), wait);
      }
    });
    r.on('end', () => (ended = true));
    r.on('error', () => undefined);
  });
  req.on('error', (err) => rejectHeaders(err));
  req.end(body);
  return {
    headers,
    get bytes() {
      return bytes;
    },
    get seconds() {
      return started === undefined ? 0 : (performance.now() - started) / 1000;
    },
    get ended() {
      return ended;
    },
    destroy() {
      res?.destroy();
      req.destroy();
    },
  };
}

async function main() {
  const loadAtStart = loadAverage();
  const warning = staleBuildWarning();
  if (warning) console.error(warning);

  const sluice = await startSluice();
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 2 });
  onCleanup(() => redis.quit());
  const db = new pg.Client({ connectionString: DATABASE_URL });
  await db.connect();
  onCleanup(() => db.end());

  await sleep(1000);
  const idle = { api: rssBytes(sluice.api.pid), worker: rssBytes(sluice.worker.pid) };
  const groups = sluiceCpuGroups(sluice);
  const cpuBefore = cpuSnapshot(groups);
  const rss = sampleRss([sluice.api.pid, sluice.worker.pid], 100);
  const reader = slowRead(sluice);
  onCleanup(() => reader.destroy());
  const head = await unlessDied(sluice, reader.headers);
  if (head.status !== 200 || !head.queryId)
    throw new Error(`execute answered HTTP ${head.status}, query id ${head.queryId}`);
  const key = `${sluice.prefix}:q:{${head.queryId}}:out`;
  console.log(
    `query ${head.queryId}: reading ${ACCEPT} at ${mb(RATE)} MiB/s for ${SECONDS} s (stream ${key})`,
  );

  // Once a second: stream memory and length, Redis's total, api and worker RSS.
  const samples = [];
  const t0 = performance.now();
  while (performance.now() - t0 < SECONDS * 1000 && !reader.ended) {
    await unlessDied(sluice, sleep(1000));
    const [usage, xlen, info] = await Promise.all([
      redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'),
      redis.xlen(key),
      redis.info('memory'),
    ]);
    const sample = {
      t: (performance.now() - t0) / 1000,
      streamBytes: Number(usage ?? 0),
      xlen,
      redisUsed: Number(/used_memory:(\d+)/.exec(info)?.[1]),
      api: rssBytes(sluice.api.pid),
      worker: rssBytes(sluice.worker.pid),
      read: reader.bytes,
    };
    samples.push(sample);
    if (samples.length % 5 === 0)
      console.log(
        `  ${sample.t.toFixed(0).padStart(3)} s: read ${mb(sample.read)} MB, stream ${mb(sample.streamBytes)} MB (${xlen} entries), api RSS ${mb(sample.api)} MB, worker RSS ${mb(sample.worker)} MB`,
      );
  }
  const cpu = cpuPercent(cpuBefore, cpuSnapshot(groups));
  const readSeconds = reader.seconds;
  const readBytes = reader.bytes;
  const finishedEarly = reader.ended;
  const info = await request(new URL(`/v1/queries/${head.queryId}`, sluice.baseUrl), {
    headers: sluice.headers,
  });
  const during = info.status === 200 ? JSON.parse(info.body) : undefined;

  // Drop the client: the query must stop and its stream go away.
  const dropAt = performance.now();
  reader.destroy();
  let backendGoneMs = NaN;
  while (performance.now() - dropAt < 10_000) {
    const { rows } = await db.query(
      'select count(*)::int as n from pg_stat_activity where application_name = $1',
      [`sluice:${head.queryId}`],
    );
    if (rows[0].n === 0) {
      backendGoneMs = performance.now() - dropAt;
      break;
    }
    await sleep(10);
  }
  await sleep(1000);
  const streamAfter = await redis.exists(key);
  const streamTtl = streamAfter ? await redis.pttl(key) : undefined;
  const streamLen = streamAfter ? await redis.xlen(key) : 0;
  const peaks = rss.stop();
  const after = await request(new URL(`/v1/queries/${head.queryId}`, sluice.baseUrl), {
    headers: sluice.headers,
  });
  const final = after.status === 200 ? JSON.parse(after.body) : undefined;

  if (samples.length === 0) throw new Error('no samples taken');
  const max = (f, from = 0, to = samples.length) => Math.max(...samples.slice(from, to).map(f));
  const third = Math.max(1, Math.floor(samples.length / 3));
  const apiPeak = peaks[sluice.api.pid].peak;
  const workerPeak = peaks[sluice.worker.pid].peak;
  const streamPeak = max((s) => s.streamBytes);
  const flat = (f) => {
    const first = max(f, 0, third);
    const last = max(f, samples.length - third);
    return { first, last, flat: last <= first + Math.max(4 * 2 ** 20, first * 0.1) };
  };
  const apiFlat = flat((s) => s.api);
  const streamFlat = flat((s) => s.streamBytes);
  const redisFlat = flat((s) => s.redisUsed);

  const step = Math.max(1, Math.round(samples.length / 12));
  const timeline = samples.filter((_, i) => i % step === step - 1 || i === samples.length - 1);
  const out = [
    ...reportHeader(
      `Slow reader, ${ROWS.toLocaleString('en-US')} rows at ${mb(RATE)} MiB/s`,
      loadAtStart,
    ),
    `- Statement: the mixed-type select of bench/large-result.mjs over generate_series(1, ${ROWS}), \`Accept: ${ACCEPT}\`, default fetch_size`,
    `- Client: node:http, response paused/resumed on a timer to hold ${mb(RATE)} MiB/s; dropped after ${SECONDS} s`,
    `- Read ${mb(readBytes)} MB in ${readSeconds.toFixed(1)} s (${mb(readBytes / readSeconds)} MiB/s)${finishedEarly ? ', the whole result (ended before the time was up)' : ''}; the registry counted ${during?.rows?.toLocaleString('en-US') ?? '?'} rows sent`,
    '',
    '| s | read MB | stream MB (MEMORY USAGE) | XLEN | Redis used MB | api RSS MB | worker RSS MB |',
    '|---:|---:|---:|---:|---:|---:|---:|',
    ...timeline.map(
      (s) =>
        `| ${s.t.toFixed(0)} | ${mb(s.read)} | ${mb(s.streamBytes)} | ${s.xlen} | ${mb(s.redisUsed)} | ${mb(s.api)} | ${mb(s.worker)} |`,
    ),
    '',
    `- api RSS: idle ${mb(idle.api)} MB, peak ${mb(apiPeak)} MB (100 ms sampling); max of first third ${mb(apiFlat.first)} MB, of last third ${mb(apiFlat.last)} MB — ${apiFlat.flat ? 'flat' : 'growing'}`,
    `- worker RSS: idle ${mb(idle.worker)} MB, peak ${mb(workerPeak)} MB`,
    `- stream: peak ${mb(streamPeak)} MB, peak XLEN ${max((s) => s.xlen)}; first third ${mb(streamFlat.first)} MB, last third ${mb(streamFlat.last)} MB — ${streamFlat.flat ? 'flat' : 'growing'}`,
    `- Redis used_memory (whole server, other users included): first third ${mb(redisFlat.first)} MB, last third ${mb(redisFlat.last)} MB`,
    `- After the client dropped: backend gone from pg_stat_activity in ${Number.isFinite(backendGoneMs) ? `${backendGoneMs.toFixed(0)} ms` : 'more than 10 s'}; stream key ${streamAfter ? `still there 1 s later (XLEN ${streamLen}, expires in ${(streamTtl / 1000).toFixed(0)} s)` : 'deleted within 1 s'}; query state ${final?.state ?? '?'}${final?.status ? ` (${final.status.reason})` : ''}`,
    '',
    'Goals:',
    '',
    `- api RSS < ${GOAL_API_MB} MB and flat: **${mb(apiPeak)} MB** — ${met(apiPeak < GOAL_API_MB * 2 ** 20 && apiFlat.flat)}`,
    `- stream < ${GOAL_STREAM_MB} MB and flat: **${mb(streamPeak)} MB** — ${met(streamPeak < GOAL_STREAM_MB * 2 ** 20 && streamFlat.flat)}`,
    '',
    `CPU while reading (100% = one core): ${cpuLine(cpu)}`,
  ];
  if (!Number.isFinite(backendGoneMs) || final?.state === 'running') printChildOutput(sluice);
  console.log(`\n${out.join('\n')}\n`);
}

await runMain(main);
