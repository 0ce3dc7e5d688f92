// Compressed size and speed of every Preferred-Compression-Level, gzip and br, the way the worker
// compresses a body: Sluice's ChunkCompressor (dist/), the JSON head held, one flush per chunk of
// 1,000 rows. Next to each level, the fixed setting the level would have without the trial that
// keeps sizes from growing with the level (see libs/formats/src/chunk.compressor.ts).
//
//   npm run build && node bench/compression-levels.mjs
//
// Three results of about 1.4 MB of JSON each, made in-process (no service, no database): an orders
// table (ordinary rows), rows mixing names and flags with a digest and random numbers, and
// `select g, md5(g::text)` (the case: high-entropy text). MB/s is uncompressed body bytes
// per second of compression, trial included, median of BENCH_RUNS runs. About 15 s.
import { createHash } from 'node:crypto';
import { constants, createBrotliCompress, createGzip } from 'node:zlib';
import { envInt, hardTimeLimit, requireDist } from './lib/env.mjs';

const { ChunkCompressor, BROTLI_QUALITY } = requireDist('libs/formats/src/chunk.compressor.js');
const RUNS = envInt('BENCH_RUNS', 3);
// About 5 s a run; every compression awaits its flushes, so the timer fires between them.
hardTimeLimit((RUNS * 20 + 60) * 1000);
const ROWS_PER_CHUNK = 1000;

function random(seed) {
  let s = seed;
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const md5 = (text) => createHash('md5').update(text).digest('hex');
const pick = (next, list) => list[Math.floor(next() * list.length)];
const WORDS = ['apple', 'pear', 'plum', 'cherry', 'banana', 'kiwi', 'mango', 'fig', 'lime'];

const DATASETS = {
  orders: (next, i, state) => {
    state.at = (state.at ?? Date.UTC(2024, 0, 1)) + Math.floor(next() * 60_000);
    return [
      100_000 + i,
      `customer ${Math.floor(next() * 500)}`,
      pick(next, ['new', 'paid', 'shipped', 'delivered', 'returned']),
      Math.floor(next() * 50_000) / 100,
      new Date(state.at).toISOString().replace('.000Z', '+00:00'),
      pick(next, ['DE', 'FR', 'US', 'GB', 'NL', 'SE', 'IT', 'ES']),
      next() < 0.7 ? null : `${pick(next, WORDS)} please`,
    ];
  },
  'mixed with digests': (next, i) => [
    i,
    `${pick(next, WORDS)} ${Math.floor(next() * 1000)}`,
    Math.floor(next() * 1e6) / 100,
    new Date(Date.UTC(2024, 0, 1) + Math.floor(next() * 3e10))
      .toISOString()
      .replace('.000Z', '+00:00'),
    next() < 0.5,
    md5(String(i)),
    next() < 0.1 ? null : Math.floor(next() * 1e9),
  ],
  'md5 digests': (_, i) => [i, md5(String(i))],
};

function body(row) {
  const next = random(7);
  const state = {};
  const rows = [];
  for (let i = 1, size = 0; size < 1_400_000; i++) {
    const text = JSON.stringify(row(next, i, state));
    rows.push(text);
    size += text.length + 1;
  }
  const chunks = [];
  for (let at = 0; at < rows.length; at += ROWS_PER_CHUNK) {
    chunks.push(Buffer.from((at ? ',' : '') + rows.slice(at, at + ROWS_PER_CHUNK).join(',')));
  }
  const head = Buffer.from(`{"query_id":"${crypto.randomUUID()}","schema":[],"data":[`);
  const tail = Buffer.from(`],"status":{"reason":"OK","sql_state":"00000","vendor_code":0}}`);
  return {
    head,
    chunks,
    tail,
    bytes: head.length + tail.length + chunks.reduce((n, c) => n + c.length, 0),
  };
}

async function viaSluice(encoding, level, b) {
  const compressor = new ChunkCompressor(encoding, level);
  const started = process.hrtime.bigint();
  let size = (await compressor.hold(b.head)).length;
  for (const chunk of b.chunks) size += (await compressor.push(chunk)).length;
  size += (await compressor.finish(b.tail)).length;
  return { size, ms: Number(process.hrtime.bigint() - started) / 1e6, setting: compressor.setting };
}

async function fixed(encoding, setting, b) {
  const stream =
    encoding === 'gzip'
      ? createGzip({ level: setting })
      : createBrotliCompress({
          params: { [constants.BROTLI_PARAM_QUALITY]: setting, [constants.BROTLI_PARAM_LGWIN]: 20 },
        });
  const flush = encoding === 'gzip' ? constants.Z_SYNC_FLUSH : constants.BROTLI_OPERATION_FLUSH;
  let size = 0;
  stream.on('data', (c) => (size += c.length));
  const started = process.hrtime.bigint();
  stream.write(b.head);
  for (const chunk of b.chunks) {
    stream.write(chunk);
    await new Promise((r) => stream.flush(flush, r));
  }
  await new Promise((r) => {
    stream.once('end', r);
    stream.end(b.tail);
  });
  return { size, ms: Number(process.hrtime.bigint() - started) / 1e6 };
}

const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];

for (const [name, row] of Object.entries(DATASETS)) {
  const b = body(row);
  console.log(
    `\n### ${name}: ${(b.bytes / 1e6).toFixed(2)} MB of JSON, ${b.chunks.length} chunks\n`,
  );
  console.log(
    '| encoding | level | setting used | bytes | MB/s | fixed setting | its bytes | its MB/s |',
  );
  console.log('|---|---|---|---|---|---|---|---|');
  for (const encoding of ['gzip', 'br']) {
    let previous = Infinity;
    for (let level = 1; level <= 9; level++) {
      const runs = [];
      for (let r = 0; r < RUNS; r++) runs.push(await viaSluice(encoding, level, b));
      const { size, setting } = runs[0];
      const mbs = b.bytes / 1e3 / median(runs.map((x) => x.ms));
      const own = encoding === 'gzip' ? level : BROTLI_QUALITY[level];
      const ownRuns = [];
      for (let r = 0; r < RUNS; r++) ownRuns.push(await fixed(encoding, own, b));
      const ownMbs = b.bytes / 1e3 / median(ownRuns.map((x) => x.ms));
      const grew = size > previous ? ' **grew**' : '';
      previous = size;
      console.log(
        `| ${encoding} | ${level} | ${encoding === 'gzip' ? 'zlib' : 'quality'} ${setting} | ${size}${grew} | ${mbs.toFixed(0)} | ${own} | ${ownRuns[0].size} | ${ownMbs.toFixed(0)} |`,
      );
    }
  }
}
