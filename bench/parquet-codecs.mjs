// Page codecs for the Parquet encoder compared: MB/s and compressed/raw size of each candidate on
// page-sized buffers (1 MiB and less) of PLAIN-encoded mixed columns — int32 ids, int64 timestamps,
// doubles, short text labels, small JSON objects — compressed four times over, median of 5 runs.
// In-process, single-threaded, ~20 s. Figures in bench/PARQUET.md ("Page codecs").
//
//   node bench/parquet-codecs.mjs
//
// The candidates that are not the project's dependencies are installed for the bench only, e.g.
//   npm install --prefix /tmp/codecs @bokuweb/zstd-wasm @hpcc-js/wasm-zstd snappy
//   NODE_PATH=/tmp/codecs/node_modules node bench/parquet-codecs.mjs
// A candidate that is not installed is skipped.
import { createRequire } from 'node:module';
import { gzipSync } from 'node:zlib';
import { hardTimeLimit } from './lib/env.mjs';

const require = createRequire(import.meta.url);
hardTimeLimit(120_000, () => {});

function lengthPrefixed(values) {
  const parts = [];
  for (const v of values) {
    const s = Buffer.from(v);
    const l = Buffer.alloc(4);
    l.writeUInt32LE(s.length);
    parts.push(l, s);
  }
  return Buffer.concat(parts);
}

function pages() {
  const n = 262144;
  const ids = Buffer.alloc(n * 4);
  for (let i = 0; i < n; i++) ids.writeInt32LE(1_000_000 + i, i * 4);
  const ts = Buffer.alloc((n / 2) * 8);
  for (let i = 0; i < n / 2; i++) {
    ts.writeBigInt64LE(
      1_700_000_000_000_000n + BigInt(i) * 1_000_000n + BigInt((i * 7919) % 1000),
      i * 8,
    );
  }
  const doubles = Buffer.alloc((n / 2) * 8);
  for (let i = 0; i < n / 2; i++) doubles.writeDoubleLE(Math.sin(i) * 1000, i * 8);
  const labels = lengthPrefixed(
    Array.from(
      { length: 40_000 },
      (_, i) => `label-${(i * 2654435761) % 100000}-${'x'.repeat(i % 13)}`,
    ),
  );
  const json = lengthPrefixed(
    Array.from({ length: 12_000 }, (_, i) =>
      JSON.stringify({ k: i % 50, tag: `t${i % 7}`, ok: i % 3 === 0, v: (i * 1.37).toFixed(2) }),
    ),
  );
  return [ids, ts, doubles, labels, json];
}

function optional(name) {
  try {
    return require(name);
  } catch {
    return undefined;
  }
}

// ESM import() does not look in NODE_PATH: resolve the path with require's resolver first.
async function optionalImport(name) {
  try {
    return await import(require.resolve(name));
  } catch {
    return undefined;
  }
}

const candidates = {};
const toondepauw = optional('@toondepauw/node-zstd');
if (toondepauw) {
  for (const level of [1, 3]) {
    const e = new toondepauw.Encoder(level);
    candidates[`@toondepauw/node-zstd (napi) level ${level}`] = (b) => e.encodeSync(b);
  }
}
const bokuweb = await optionalImport('@bokuweb/zstd-wasm');
if (bokuweb) {
  await bokuweb.init();
  for (const level of [1, 3]) {
    candidates[`@bokuweb/zstd-wasm level ${level}`] = (b) => bokuweb.compress(b, level);
  }
}
const hpcc = await optionalImport('@hpcc-js/wasm-zstd');
if (hpcc) {
  const zstd = await hpcc.Zstd.load();
  for (const level of [1, 3])
    candidates[`@hpcc-js/wasm-zstd level ${level}`] = (b) => zstd.compress(b, level);
}
const snappy = optional('snappy');
if (snappy) candidates['snappy (napi)'] = (b) => snappy.compressSync(b);
const snappyjs = optional('snappyjs');
if (snappyjs) candidates['snappyjs (JS)'] = (b) => snappyjs.compress(b);
candidates['node:zlib gzip level 1'] = (b) => gzipSync(b, { level: 1 });
candidates['node:zlib gzip level 6'] = (b) => gzipSync(b, { level: 6 });

const data = pages();
const total = data.reduce((n, b) => n + b.length, 0);
console.log(`| codec | MB/s | compressed / raw |\n|---|---:|---:|`);
for (const [name, compress] of Object.entries(candidates)) {
  for (const b of data) compress(b); // warm-up
  const times = [];
  let size = 0;
  for (let run = 0; run < 5; run++) {
    const start = process.hrtime.bigint();
    size = 0;
    for (let k = 0; k < 4; k++) for (const b of data) size += compress(b).length;
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  const mbps = (4 * total) / 1e6 / (times[2] / 1000);
  console.log(`| ${name} | ${mbps.toFixed(0)} | ${(size / (4 * total)).toFixed(3)} |`);
}
process.exit(0);
