// The floors under issue 42's two read goals, with no Sluice process: what this machine does when
// a client reads BENCH_SEGMENTS objects of BENCH_SEGMENT_MIB MiB (random bytes) from s3rver (the
// store bench/spool.mjs runs) by presigned URLs, every way alternated in each round, with each
// process's on-CPU time (schedstat, all threads) over each read:
//
// - store ×1 / ×4: fetch, the bytes counted and dropped, one object at a time / four at once;
// - relay: the same objects through a minimal relay process (bench/lib/relay-server.mjs: node:http,
//   each object piped into one response with Content-Length): the cost of a hop with nothing of
//   Sluice's in it, against which the api's relay (bench/spool.mjs, bench/spool-read.mjs) compares;
// - file ×1 / ×4: each object written into one file at its offset as it comes (a stream per
//   object, positional): the least a downloader that writes the file can do, one / four at once;
// - client ×1 / ×4: segmentBytes of libs/client (what SluiceClient.result reads segments with),
//   in order, piped to a file;
// - export ×1 / ×4: what `sluice export` does with a kept result's segments: segmentsAsTheyCome
//   of libs/client, each written into the file at its offset as it comes (writeAtOffsets).
//
//   npm run build && BENCH_ROUNDS=6 node bench/spool-floor.mjs
//
// BENCH_S3_HIGH_WATER_MARK: the fs read size s3rver reads objects with (Node's default 64 KiB).
// BENCH_MODES: a comma-separated subset of the names above. BENCH_HARD_LIMIT_SECONDS (600).
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ROOT, envInt, hardTimeLimit, requireDist } from './lib/env.mjs';

const SEGMENTS = envInt('BENCH_SEGMENTS', 15);
const SIZE = envInt('BENCH_SEGMENT_MIB', 16) * 2 ** 20;
const ROUNDS = envInt('BENCH_ROUNDS', 4);
const HIGH_WATER_MARK = process.env.BENCH_S3_HIGH_WATER_MARK;
const require = createRequire(path.join(ROOT, 'package.json'));
const { S3Client, PutObjectCommand, GetObjectCommand } = require('@aws-sdk/client-s3');
const { getSignedUrl } = require('@aws-sdk/s3-request-presigner');
const { segmentBytes, segmentsAsTheyCome } = requireDist('libs/client/src/segments.reader.js');
const { writeAtOffsets } = requireDist('apps/cli/src/client.commands.js');
const { STORE_IDLE_TIMEOUT_MS } = requireDist('libs/client/src/sluice.client.js');

const S3RVER = `
  const S3rver = require('s3rver');
  const fs = require('fs');
  const hwm = Number(process.env.BENCH_S3_HIGH_WATER_MARK || 0);
  if (hwm > 0) {
    const read = fs.createReadStream;
    fs.createReadStream = (p, o) => read(p, { ...(o || {}), highWaterMark: hwm });
  }
  const [directory, bucket] = process.argv.slice(1);
  new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] })
    .run()
    .then(({ port }) => process.stdout.write(JSON.stringify({ port }) + '\\n'));`;

const children = [];
const work = fs.mkdtempSync(path.join(tmpdir(), 'sluice-bench-spool-floor-'));
process.on('exit', () => {
  for (const child of children) child.kill();
  fs.rmSync(work, { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(130));
// Its children and files go with the exit handler above.
hardTimeLimit(envInt('BENCH_HARD_LIMIT_SECONDS', 600) * 1000);

async function startChild(args) {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: process.env,
  });
  children.push(child);
  const [line] = await once(child.stdout, 'data');
  return { pid: child.pid, port: JSON.parse(line.toString()).port };
}

/** On-CPU seconds of a process, all its threads (schedstat's first field, ns). */
function cpuSeconds(pid) {
  let sum = 0;
  for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      sum += Number(fs.readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return sum / 1e9;
}

const s3 = await startChild(['-e', S3RVER, path.join(work, 's3'), 'floor']);
fs.mkdirSync(path.join(work, 's3'), { recursive: true });
const client = new S3Client({
  endpoint: `http://127.0.0.1:${s3.port}`,
  forcePathStyle: true,
  region: 'us-east-1',
  credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  requestChecksumCalculation: 'WHEN_REQUIRED',
  responseChecksumValidation: 'WHEN_REQUIRED',
});
const segments = [];
const whole = createHash('sha256');
for (let i = 0; i < SEGMENTS; i++) {
  const body = randomBytes(SIZE);
  whole.update(body);
  await client.send(new PutObjectCommand({ Bucket: 'floor', Key: `s${i}`, Body: body }));
  const command = new GetObjectCommand({ Bucket: 'floor', Key: `s${i}` });
  segments.push({
    offset: i * SIZE,
    size: SIZE,
    url: await getSignedUrl(client, command, { expiresIn: 3600 }),
  });
}
client.destroy();
const sha = whole.digest('hex');
const total = SEGMENTS * SIZE;
const manifest = { query_id: 'floor', complete: true, size: total, segments };
const relay = await startChild([
  path.join(ROOT, 'bench/lib/relay-server.mjs'),
  JSON.stringify(segments.map((s) => s.url)),
  String(total),
]);
const file = path.join(work, 'result.bin');

/** `n` at a time, each object given to `each` in turn; the sum of what `each` answers. */
async function eachAtOnce(n, each) {
  let next = 0;
  let sum = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      for (let i = next++; i < segments.length; i = next++) {
        const got = await each(segments[i]);
        sum += got ?? 0;
      }
    }),
  );
  return sum;
}
const count = async (body) => {
  let bytes = 0;
  for await (const chunk of body) bytes += chunk.byteLength;
  return bytes;
};
const storeN = (n) => () => eachAtOnce(n, async (s) => count((await fetch(s.url)).body));
const fileN = (n) => async () => {
  fs.closeSync(fs.openSync(file, 'w'));
  await eachAtOnce(n, async (s) => {
    const res = await fetch(s.url);
    await pipeline(
      Readable.fromWeb(res.body),
      fs.createWriteStream(file, { flags: 'r+', start: s.offset }),
    );
  });
  return 'file';
};
/** What the client reads the segments by, `parallel` at once. */
const sourceOf = (parallel) => ({
  queryId: 'floor',
  refresh: async () => manifest,
  fetch,
  parallel,
  attempts: 3,
  idleMs: STORE_IDLE_TIMEOUT_MS,
});
const clientN = (parallel) => async () => {
  const bytes = segmentBytes(manifest, sourceOf(parallel));
  await pipeline(Readable.from(bytes), fs.createWriteStream(file));
  return 'file';
};
const exportN = (parallel) => async () => {
  await writeAtOffsets(segmentsAsTheyCome(manifest, sourceOf(parallel)), file, () => undefined);
  return 'file';
};
const modes = {
  'store x1': storeN(1),
  'store x4': storeN(4),
  relay: async () => count((await fetch(`http://127.0.0.1:${relay.port}/`)).body),
  'file x1': fileN(1),
  'file x4': fileN(4),
  'client x1': clientN(1),
  'client x4': clientN(4),
  'export x1': exportN(1),
  'export x4': exportN(4),
};
const only = process.env.BENCH_MODES?.split(',').map((s) => s.trim());
const names = Object.keys(modes).filter((m) => !only || only.includes(m));
const pids = { client: process.pid, s3rver: s3.pid, relay: relay.pid };
const runs = Object.fromEntries(names.map((n) => [n, []]));
const loadAtStart = fs.readFileSync('/proc/loadavg', 'utf8').trim();
for (let round = 0; round < ROUNDS; round++) {
  for (const name of round % 2 === 0 ? names : [...names].reverse()) {
    const before = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, cpuSeconds(p)]));
    const started = performance.now();
    const made = await modes[name]();
    const seconds = (performance.now() - started) / 1000;
    const cpu = Object.fromEntries(
      Object.entries(pids).map(([k, p]) => [k, cpuSeconds(p) - before[k]]),
    );
    if (made === 'file') {
      const got = createHash('sha256').update(fs.readFileSync(file)).digest('hex');
      if (got !== sha) throw new Error(`${name}: the file differs from the objects`);
    } else if (made !== total) throw new Error(`${name}: ${made} bytes of ${total}`);
    runs[name].push({ seconds, cpu });
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mib = total / 2 ** 20;
console.log(
  `### Spool read floors (bench/spool-floor.mjs): ${SEGMENTS} objects of ${SIZE / 2 ** 20} MiB from s3rver, ${ROUNDS} rounds, s3rver fs reads of ${HIGH_WATER_MARK ?? '64 KiB (default)'}`,
);
console.log(
  `- Load average at start: ${loadAtStart}; at end: ${fs.readFileSync('/proc/loadavg', 'utf8').trim()}`,
);
console.log('');
console.log(
  `| way | MiB/s (median) | runs | ${Object.keys(pids)
    .map((k) => `${k} CPU-s`)
    .join(' | ')} |`,
);
console.log(
  `|---|---:|---|${Object.keys(pids)
    .map(() => '---:')
    .join('|')}|`,
);
for (const name of names) {
  const rs = runs[name];
  console.log(
    `| ${name} | ${(mib / median(rs.map((r) => r.seconds))).toFixed(0)} | ${rs
      .map((r) => (mib / r.seconds).toFixed(0))
      .join(', ')} | ${Object.keys(pids)
      .map((k) => median(rs.map((r) => r.cpu[k])).toFixed(2))
      .join(' | ')} |`,
  );
}
process.exit(0);
