// Compares Parquet writers for Sluice's encoder: 1M rows of mixed types, as PostgreSQL's text output
// (what the worker gets from pg-cursor with type parsing off), fed 1,000 rows at a time (the default
// fetch_size) and encoded into one Parquet file with row groups flushed as they fill.
//
//   node bench/parquet-libraries.mjs                 # every candidate, BENCH_RUNS runs each
//   node bench/parquet-libraries.mjs sluice hyparquet-writer   # only these candidates
//
// Each run is its own child process, so that peak RSS is that candidate's alone. The child times
// only the encoding (text → typed values → library → bytes), not the row generator, and writes the
// file to a temporary directory; the parent then reads it back (hyparquet; apache-arrow for the
// Arrow stream) and checks the row count and every value of the first and the last row group.
//
// With --postgres it measures the worker's path instead: the same kind of rows made by PostgreSQL
// (generate_series), read with pg-cursor in text mode 1,000 rows at a time and encoded by Sluice's
// encoders, next to `COPY … TO STDOUT` (psql) and the cursor alone, on BENCH_DATABASE_URL.
//
// The libraries compared are not the project's dependencies: install them for the bench only
// (apache-arrow and hyparquet, the reader, are):
//   npm install --no-save hyparquet-writer parquet-wasm @dsnp/parquetjs
// (a later `npm install` prunes them: installed elsewhere, NODE_PATH=<there>/node_modules finds them)
// The `sluice …` candidates are libs/formats' encoders compiled to dist/ (`npm run build`; or
// SLUICE_FORMATS_DIR=<dir with parquet.encoder.js>). `arrow (sluice ArrowEncoder)` writes the Arrow
// IPC stream instead, for comparison; `text → JS values only` is the conversion the library
// candidates share, without any encoding.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  openSync,
  writeSync,
  closeSync,
  statSync,
} from 'node:fs';
import { tmpdir, cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Writable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import { ROOT, envInt, hardTimeLimit, warnIfStale, yieldToTimers } from './lib/env.mjs';

const require = createRequire(import.meta.url);
const FORMATS_DIR = process.env.SLUICE_FORMATS_DIR || join(ROOT, 'dist/libs/formats/src');
const { RowBatch } = require(join(FORMATS_DIR, 'row.batch.js'));

/** For the children: the repo's packages, then NODE_PATH (e.g. where the bench-only libraries
 * were installed, if `npm install` in the repo keeps pruning them). */
function nodePath() {
  return [join(ROOT, 'node_modules'), process.env.NODE_PATH].filter(Boolean).join(':');
}

const ROWS = envInt('BENCH_ROWS', 1_000_000);
const CHUNK = envInt('BENCH_CHUNK_ROWS', 1000);
const ROW_GROUP = envInt('BENCH_ROW_GROUP_ROWS', 100_000);
const RUNS = envInt('BENCH_RUNS', 3);
/** The longest one child may run; the script's hard limit allows half of it for each run. */
const CHILD_TIMEOUT_MS = 600_000;
/** Set by the parent (hardTimeLimit): how long its children may still run. */
let limit = { remaining: () => CHILD_TIMEOUT_MS };
/** Removed when the hard limit stops the script (a `finally` would not run then). */
const tempDirs = [];

/** The parent's hard limit: `runs` children of at most 5 min each, and 2 min to spare. */
function limitTo(runs) {
  limit = hardTimeLimit((runs * 300 + 120) * 1000, () => {
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  });
}
const childTimeout = () => Math.min(CHILD_TIMEOUT_MS, limit.remaining());

// ---------------------------------------------------------------------------------------------
// Rows: PostgreSQL's text output (TimeZone UTC, DateStyle ISO), deterministic from the row index.

const COLUMNS = [
  { name: 'id', type: 'integer', oid: 23 },
  { name: 'big', type: 'bigint', oid: 20 },
  { name: 'amount', type: 'numeric', oid: 1700 },
  { name: 'label', type: 'text', oid: 25 },
  { name: 'created', type: 'timestamp with time zone', oid: 1184 },
  { name: 'active', type: 'boolean', oid: 16 },
  { name: 'doc', type: 'jsonb', oid: 3802 },
  { name: 'score', type: 'double precision', oid: 701 },
  { name: 'note', type: 'text', oid: 25 },
];
const WORDS = [
  'alpha',
  'beta',
  'gamma',
  'delta',
  'épsilon',
  'zeta',
  'ηta',
  'theta',
  '東京',
  'kappa',
];
const pad = (n, w) => String(n).padStart(w, '0');

function hash(i, salt) {
  let h = Math.imul(i ^ salt, 0x9e3779b1);
  h ^= h >>> 15;
  h = Math.imul(h, 0x85ebca77);
  h ^= h >>> 13;
  return h >>> 0;
}

/** Row i as PostgreSQL prints it. */
function textRow(i) {
  const h = hash(i, 0x1234);
  const g = hash(i, 0x5678);
  const ms = 1_700_000_000_000 + i * 1_337 + (h % 1000);
  const d = new Date(ms);
  const ts =
    `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1, 2)}-${pad(d.getUTCDate(), 2)} ` +
    `${pad(d.getUTCHours(), 2)}:${pad(d.getUTCMinutes(), 2)}:${pad(d.getUTCSeconds(), 2)}` +
    `.${pad(d.getUTCMilliseconds(), 3)}${pad(g % 1000, 3)}+00`;
  return [
    String(i),
    String(BigInt(h) * 2_147_483_647n + BigInt(g)),
    `${h % 100_000}.${pad(g % 100, 2)}`,
    `${WORDS[h % 10]} ${WORDS[g % 10]} #${i}`,
    ts,
    h & 1 ? 't' : 'f',
    `{"n": ${g % 1000}, "tag": "${WORDS[g % 10]}", "ok": ${h % 3 === 0}}`,
    i % 1000 === 7 ? 'NaN' : String((h / 0xffffffff) * 1000),
    i % 20 === 0 ? `note ${i}` : null,
  ];
}

// ---------------------------------------------------------------------------------------------
// Shared text → typed value conversion for the library candidates (the same for all of them).

function dateToDays(y, m, d) {
  // days from civil (Howard Hinnant), proleptic Gregorian
  y -= m <= 2 ? 1 : 0;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}
const num = (s, a, b) => {
  let n = 0;
  for (let k = a; k < b; k++) n = n * 10 + s.charCodeAt(k) - 48;
  return n;
};
/** 'YYYY-MM-DD HH:MM:SS.ffffff+00' → µs since the epoch (bigint); enough for this data set. */
function timestamptzMicros(s) {
  const days = dateToDays(num(s, 0, 4), num(s, 5, 7), num(s, 8, 10));
  const secs = days * 86400 + num(s, 11, 13) * 3600 + num(s, 14, 16) * 60 + num(s, 17, 19);
  let frac = 0;
  let k = 19;
  if (s.charCodeAt(k) === 46) {
    let digits = 0;
    for (k = 20; s.charCodeAt(k) >= 48 && s.charCodeAt(k) <= 57; k++, digits++) {
      frac = frac * 10 + s.charCodeAt(k) - 48;
    }
    frac *= 10 ** (6 - digits);
  }
  const sign = s.charCodeAt(k) === 45 ? -1 : 1;
  const offset = num(s, k + 1, k + 3) * 3600;
  return BigInt((secs - sign * offset) * 1_000_000 + frac);
}
const CONVERT = [
  (s) => +s,
  (s) => BigInt(s),
  (s) => s,
  (s) => s,
  timestamptzMicros,
  (s) => s === 't',
  (s) => s,
  (s) => +s,
  (s) => s,
];

/** Column-wise JS arrays (null for NULL) for one row group. */
class ColumnBuffers {
  constructor() {
    this.reset();
  }
  reset() {
    this.cols = COLUMNS.map(() => []);
    this.length = 0;
  }
  add(rows) {
    for (let c = 0; c < COLUMNS.length; c++) {
      const out = this.cols[c];
      const conv = CONVERT[c];
      for (let r = 0; r < rows.length; r++) {
        const v = rows[r][c];
        out.push(v === null ? null : conv(v));
      }
    }
    this.length += rows.length;
  }
}

// ---------------------------------------------------------------------------------------------
// Candidates: each returns { write(rows): Uint8Array|undefined, end(): Uint8Array|Promise }.
// `rows` is one chunk of text rows; a candidate buffers up to ROW_GROUP rows and then flushes.

function sluice(file, className, settings) {
  const { [className]: Encoder } = require(join(FORMATS_DIR, file));
  const encoder = new Encoder(
    { queryId: 'bench', layout: 'array', columns: COLUMNS.map((c) => ({ ...c, json: (s) => s })) },
    settings,
  );
  return {
    head: () => encoder.head(),
    write: (rows) => encoder.rows(RowBatch.fromText(rows)),
    end: () => encoder.end({ reason: 'OK', sql_state: '00000', vendor_code: 0 }, false),
    stream: file.startsWith('arrow'),
  };
}

const MB = 1 << 20;
const CANDIDATES = {
  // libs/formats ParquetEncoder, as the worker runs it (default: 8 MB row groups, uncompressed)
  sluice: () => sluice('parquet.encoder.js', 'ParquetEncoder'),
  'sluice (16 MB row groups)': () =>
    sluice('parquet.encoder.js', 'ParquetEncoder', { rowGroupBytes: 16 * MB }),
  'sluice (32 MB row groups)': () =>
    sluice('parquet.encoder.js', 'ParquetEncoder', { rowGroupBytes: 32 * MB }),
  'sluice (GZIP level 1)': () => sluice('parquet.encoder.js', 'ParquetEncoder', { codec: 'GZIP' }),
  'arrow (sluice ArrowEncoder)': () => sluice('arrow.encoder.js', 'ArrowEncoder'),
  'parquet-wasm (fed sluice Arrow batches)': () => parquetWasmFromArrow(),
  'text → JS values only': () => {
    const buf = new ColumnBuffers();
    return {
      head: () => Buffer.alloc(0),
      write(rows) {
        buf.add(rows);
        if (buf.length >= ROW_GROUP) buf.reset();
      },
      end: () => Buffer.alloc(0),
      noFile: true,
    };
  },
  'hyparquet-writer': () => hyparquetWriter({}),
  'hyparquet-writer (no stats, PLAIN)': () =>
    hyparquetWriter({ statistics: false, encoding: 'PLAIN' }),
  'hyparquet-writer (no stats, PLAIN, uncompressed)': () =>
    hyparquetWriter({ statistics: false, encoding: 'PLAIN', codec: 'UNCOMPRESSED' }),
  'parquet-wasm': () => parquetWasm(false),
  'parquet-wasm (uncompressed, no dict)': () => parquetWasm(true),
  '@dsnp/parquetjs': () => parquetjs(),
};

function hyparquetSchema() {
  const opt = { repetition_type: 'OPTIONAL' };
  return [
    { name: 'root', num_children: COLUMNS.length },
    { name: 'id', type: 'INT32', ...opt },
    { name: 'big', type: 'INT64', ...opt },
    { name: 'amount', type: 'BYTE_ARRAY', converted_type: 'UTF8', ...opt },
    { name: 'label', type: 'BYTE_ARRAY', converted_type: 'UTF8', ...opt },
    {
      name: 'created',
      type: 'INT64',
      logical_type: { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MICROS' },
      ...opt,
    },
    { name: 'active', type: 'BOOLEAN', ...opt },
    {
      name: 'doc',
      type: 'BYTE_ARRAY',
      converted_type: 'UTF8', // hyparquet-writer's JSON type wants JS values to stringify
      logical_type: { type: 'JSON' },
      ...opt,
    },
    { name: 'score', type: 'DOUBLE', ...opt },
    { name: 'note', type: 'BYTE_ARRAY', converted_type: 'UTF8', ...opt },
  ];
}

function hyparquetWriter({ statistics = true, encoding, codec = 'SNAPPY' }) {
  const { ParquetWriter, ByteWriter } = require('hyparquet-writer');
  const writer = new ByteWriter(1 << 20);
  const take = () => {
    const out = Buffer.from(new Uint8Array(writer.buffer, 0, writer.index));
    writer.index = 0; // keep counting `offset`, reuse the buffer
    return out;
  };
  const pq = new ParquetWriter({ writer, schema: hyparquetSchema(), codec, statistics });
  const buf = new ColumnBuffers();
  const flush = () => {
    pq.write({
      columnData: COLUMNS.map((c, i) => ({ name: c.name, data: buf.cols[i], encoding })),
      rowGroupSize: buf.length,
    });
    buf.reset();
    return take();
  };
  return {
    head: take,
    write(rows) {
      buf.add(rows);
      return buf.length >= ROW_GROUP ? flush() : undefined;
    },
    end() {
      const last = buf.length > 0 ? flush() : Buffer.alloc(0);
      pq.finish();
      return Buffer.concat([last, take()]);
    },
  };
}

/** Builds an Arrow record batch straight from typed arrays (no per-value builder calls). */
function arrowBatch(arrow, buf) {
  const n = buf.length;
  const fields = [];
  const children = [];
  const validity = (col) => {
    const bits = new Uint8Array((n + 7) >> 3);
    let nulls = 0;
    for (let i = 0; i < n; i++) {
      if (col[i] === null) nulls++;
      else bits[i >> 3] |= 1 << (i & 7);
    }
    return { bits, nulls };
  };
  const enc = new TextEncoder();
  COLUMNS.forEach((c, i) => {
    const col = buf.cols[i];
    const { bits, nulls } = validity(col);
    let type;
    let data;
    switch (c.oid) {
      case 23:
        type = new arrow.Int32();
        data = arrow.makeData({
          type,
          length: n,
          nullCount: nulls,
          nullBitmap: bits,
          data: Int32Array.from(col, (v) => v ?? 0),
        });
        break;
      case 20:
      case 1184: {
        type = c.oid === 20 ? new arrow.Int64() : new arrow.TimestampMicrosecond('UTC');
        const a = new BigInt64Array(n);
        for (let k = 0; k < n; k++) if (col[k] !== null) a[k] = col[k];
        data = arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap: bits, data: a });
        break;
      }
      case 701:
        type = new arrow.Float64();
        data = arrow.makeData({
          type,
          length: n,
          nullCount: nulls,
          nullBitmap: bits,
          data: Float64Array.from(col, (v) => v ?? 0),
        });
        break;
      case 16: {
        type = new arrow.Bool();
        const a = new Uint8Array((n + 7) >> 3);
        for (let k = 0; k < n; k++) if (col[k]) a[k >> 3] |= 1 << (k & 7);
        data = arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap: bits, data: a });
        break;
      }
      default: {
        type = new arrow.Utf8();
        const offsets = new Int32Array(n + 1);
        let bytes = new Uint8Array(1 << 16);
        let at = 0;
        for (let k = 0; k < n; k++) {
          const s = col[k];
          if (s !== null) {
            if (at + s.length * 3 > bytes.length) {
              const grown = new Uint8Array(Math.max(bytes.length * 2, at + s.length * 3));
              grown.set(bytes.subarray(0, at));
              bytes = grown;
            }
            at += enc.encodeInto(s, bytes.subarray(at)).written;
          }
          offsets[k + 1] = at;
        }
        data = arrow.makeData({
          type,
          length: n,
          nullCount: nulls,
          nullBitmap: bits,
          valueOffsets: offsets,
          data: bytes.subarray(0, at),
        });
      }
    }
    fields.push(new arrow.Field(c.name, type, true));
    children.push(data);
  });
  const schema = new arrow.Schema(fields);
  const struct = arrow.makeData({
    type: new arrow.Struct(fields),
    length: n,
    nullCount: 0,
    children,
  });
  return new arrow.RecordBatch(schema, struct);
}

function parquetWasm(plain) {
  const arrow = require('apache-arrow');
  const pw = require('parquet-wasm');
  // writeParquet consumes its properties: a new set per call
  const props = () => {
    const builder = new pw.WriterPropertiesBuilder().setMaxRowGroupSize(ROW_GROUP);
    return plain
      ? builder.setCompression(pw.Compression.UNCOMPRESSED).setDictionaryEnabled(false).build()
      : builder.setCompression(pw.Compression.SNAPPY).build();
  };
  const buf = new ColumnBuffers();
  // parquet-wasm writes whole files only (or an async stream): one file per row group here,
  // which costs what a spliced single file would (the footer is small).
  const flush = () => {
    const ipc = arrow.tableToIPC(new arrow.Table(arrowBatch(arrow, buf)), 'stream');
    buf.reset();
    const table = pw.Table.fromIPCStream(ipc);
    const file = pw.writeParquet(table, props());
    return file;
  };
  return {
    head: () => Buffer.alloc(0),
    write(rows) {
      buf.add(rows);
      return buf.length >= ROW_GROUP ? flush() : undefined;
    },
    end: () => (buf.length > 0 ? flush() : Buffer.alloc(0)),
    separateFiles: true,
  };
}

/** parquet-wasm at its best: record batches from Sluice's ArrowEncoder, no JS values between. */
function parquetWasmFromArrow() {
  const pw = require('parquet-wasm');
  const arrow = sluice('arrow.encoder.js', 'ArrowEncoder');
  const schema = arrow.head();
  const end = arrow.end();
  let batches = [];
  let rows = 0;
  const flush = () => {
    const table = pw.Table.fromIPCStream(Buffer.concat([schema, ...batches, end]));
    batches = [];
    rows = 0;
    const props = new pw.WriterPropertiesBuilder()
      .setCompression(pw.Compression.UNCOMPRESSED)
      .setDictionaryEnabled(false)
      .build();
    return pw.writeParquet(table, props);
  };
  return {
    head: () => Buffer.alloc(0),
    write(chunk) {
      batches.push(arrow.write(chunk));
      rows += chunk.length;
      return rows >= ROW_GROUP ? flush() : undefined;
    },
    end: () => (rows > 0 ? flush() : Buffer.alloc(0)),
    separateFiles: true,
  };
}

function parquetjs() {
  const { ParquetSchema, ParquetWriter } = require('@dsnp/parquetjs');
  const schema = new ParquetSchema({
    id: { type: 'INT32', optional: true },
    big: { type: 'INT64', optional: true },
    amount: { type: 'UTF8', optional: true },
    label: { type: 'UTF8', optional: true },
    // TIMESTAMP_MICROS rejects values before 1970 in this library
    created: { type: 'TIMESTAMP_MICROS', optional: true },
    active: { type: 'BOOLEAN', optional: true },
    doc: { type: 'UTF8', optional: true }, // its JSON type JSON.stringify()s the value again
    score: { type: 'DOUBLE', optional: true },
    note: { type: 'UTF8', optional: true },
  });
  const chunks = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(chunk);
      cb();
    },
  });
  const take = () => Buffer.concat(chunks.splice(0));
  let writer;
  return {
    async head() {
      writer = await ParquetWriter.openStream(schema, sink, {
        rowGroupSize: ROW_GROUP,
        compression: 'SNAPPY',
      });
      return take();
    },
    async write(rows) {
      for (const r of rows) {
        const o = {};
        for (let c = 0; c < COLUMNS.length; c++) {
          if (r[c] !== null) o[COLUMNS[c].name] = CONVERT[c](r[c]);
        }
        await writer.appendRow(o);
      }
      return take();
    },
    async end() {
      await writer.close();
      return take();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Child: one candidate, one run. Prints one JSON line.

/** This process's peak RSS: VmHWM is per address space (getrusage's maxrss also counts the
 * parent's RSS at fork). */
function peakRss() {
  try {
    const status = readFileSync('/proc/self/status', 'utf8');
    return Number(/VmHWM:\s+(\d+) kB/.exec(status)[1]) * 1024;
  } catch {
    return process.resourceUsage().maxRSS * 1024;
  }
}

async function child(name, file) {
  const candidate = CANDIDATES[name]();
  let fd = openSync(file, 'w');
  let part = 0;
  let encodeMs = 0;
  let peakHeap = 0;
  let peakExternal = 0;
  let bytes = 0;
  const out = (b) => {
    if (b && b.length) {
      if (candidate.separateFiles) {
        closeSync(fd);
        fd = openSync(`${file}.${part++}`, 'w');
      }
      writeSync(fd, b);
      bytes += b.length;
    }
  };
  const sample = () => {
    const m = process.memoryUsage();
    if (m.heapUsed > peakHeap) peakHeap = m.heapUsed;
    if (m.arrayBuffers > peakExternal) peakExternal = m.arrayBuffers;
  };
  const baseRss = process.memoryUsage().rss;
  let t = performance.now();
  out(await candidate.head());
  encodeMs += performance.now() - t;
  for (let start = 0; start < ROWS; start += CHUNK) {
    const rows = [];
    for (let i = start; i < Math.min(ROWS, start + CHUNK); i++) rows.push(textRow(i));
    t = performance.now();
    const b = await candidate.write(rows);
    encodeMs += performance.now() - t;
    out(b);
    sample();
  }
  t = performance.now();
  out(await candidate.end());
  encodeMs += performance.now() - t;
  sample();
  closeSync(fd);
  console.log(
    JSON.stringify({
      encodeMs,
      bytes,
      peakRss: peakRss(),
      baseRss,
      peakHeap,
      peakExternal,
      separateFiles: !!candidate.separateFiles,
      check: candidate.noFile ? 'no file' : candidate.stream ? 'arrow' : 'parquet',
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// Parent: runs, verification, report.

async function verify(file, { separateFiles, check }) {
  if (check === 'no file') return '—';
  if (check === 'arrow') return verifyArrow(readFileSync(file));
  const { parquetMetadata, parquetReadObjects } = require('hyparquet');
  const data = readFileSync(separateFiles ? `${file}.0` : file);
  const ab = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
  const meta = parquetMetadata(ab);
  // one file per row group: the first one is checked
  if (Number(meta.num_rows) !== (separateFiles ? Math.min(ROWS, ROW_GROUP) : ROWS)) {
    return `wrong row count ${meta.num_rows}`;
  }
  const groups = meta.row_groups.length;
  // First and last row groups, every value.
  const last = Number(meta.num_rows - meta.row_groups[groups - 1].num_rows);
  const ranges = [[0, Number(meta.row_groups[0].num_rows)]];
  if (!separateFiles) ranges.push([last, ROWS]);
  for (const [rowStart, rowEnd] of ranges) {
    const got = await parquetReadObjects({
      file: ab,
      rowStart,
      rowEnd,
      utf8: true,
      compressors: { GZIP: (input) => new Uint8Array(gunzipSync(input)) },
    });
    for (let i = rowStart; i < rowEnd; i++) {
      const want = textRow(i);
      const row = got[i - rowStart];
      for (let c = 0; c < COLUMNS.length; c++) {
        const w = want[c] === null ? null : CONVERT[c](want[c]);
        let v = row[COLUMNS[c].name];
        if (v instanceof Date) v = BigInt(v.getTime()) * 1000n; // hyparquet gives ms Dates
        if (c === 4 && w !== null) {
          if (v !== (w / 1000n) * 1000n) return `row ${i} ${COLUMNS[c].name}: ${v} != ${w}`;
          continue;
        }
        if (c === 6 && typeof v === 'object' && v !== null) v = JSON.stringify(v);
        if (c === 6 && w !== null && JSON.stringify(JSON.parse(w)) === v) continue;
        if (!(v === w || (Number.isNaN(v) && Number.isNaN(w)) || (v == null && w == null))) {
          return `row ${i} ${COLUMNS[c].name}: ${String(v)} != ${String(w)}`;
        }
      }
    }
  }
  return separateFiles ? 'ok (first file)' : `ok (${groups} row groups)`;
}

function verifyArrow(data) {
  const { tableFromIPC } = require('apache-arrow');
  const table = tableFromIPC(data);
  if (table.numRows !== ROWS) return `wrong row count ${table.numRows}`;
  const last = table.batches[table.batches.length - 1];
  for (const [batch, first] of [
    [table.batches[0], 0],
    [last, ROWS - last.numRows],
  ]) {
    for (let i = 0; i < batch.numRows; i++) {
      const want = textRow(first + i);
      for (let c = 0; c < COLUMNS.length; c++) {
        const w = want[c] === null ? null : CONVERT[c](want[c]);
        const child = batch.getChildAt(c);
        let v = c === 4 && child.isValid(i) ? child.data[0].values[i] : child.get(i);
        if (c === 6 && w !== null && v === w) continue;
        if (!(v === w || (Number.isNaN(v) && Number.isNaN(w)) || (v == null && w == null))) {
          return `row ${first + i} ${COLUMNS[c].name}: ${String(v)} != ${String(w)}`;
        }
      }
    }
  }
  return `ok (${table.batches.length} record batches)`;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
// Times are the best of the runs: other load on the machine only ever adds to them.
const best = (xs) => Math.min(...xs);
const load = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const mb = (n) => (n / 1024 / 1024).toFixed(0);

async function parent(names) {
  const dir = mkdtempSync(join(tmpdir(), 'parquet-bench-'));
  tempDirs.push(dir);
  try {
    console.log(
      `# ${ROWS} rows × ${COLUMNS.length} columns, chunks of ${CHUNK}, row groups of ${ROW_GROUP}, ` +
        `${RUNS} runs (best time, median memory)\n# ${cpus().length} × ${cpus()[0].model}, ` +
        `${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}, load average ${load()}\n`,
    );
    console.log(
      '| library | encode s | rows/s | MB out | peak RSS MB | peak heap MB | peak ArrayBuffers MB | read back |',
    );
    console.log('|---|---:|---:|---:|---:|---:|---:|---|');
    for (const name of names) {
      const results = [];
      let failure;
      let check = '';
      for (let run = 0; run < RUNS && !failure; run++) {
        // A child is waited for synchronously: the hard limit's timer can fire only here.
        await yieldToTimers();
        const file = join(dir, 'out.parquet');
        const res = spawnSync(
          process.execPath,
          [fileURLToPath(import.meta.url), '--child', name, file],
          {
            env: { ...process.env, NODE_PATH: nodePath() },
            encoding: 'utf8',
            timeout: childTimeout(),
            maxBuffer: 1 << 24,
          },
        );
        const line = res.stdout.trim().split('\n').pop();
        if (res.status !== 0 || !line?.startsWith('{')) {
          failure = (res.stderr || res.error?.message || `exit ${res.status}`)
            .trim()
            .split('\n')
            .slice(0, 3)
            .join(' ');
          break;
        }
        const r = JSON.parse(line);
        results.push(r);
        if (run === 0) check = await verify(file, r);
        for (const f of readdirSync(dir)) rmSync(join(dir, f), { force: true });
      }
      if (failure) {
        console.log(`| ${name} | failed: ${failure.slice(0, 200)} | | | | | | |`);
        continue;
      }
      const s = best(results.map((r) => r.encodeMs)) / 1000;
      console.log(
        `| ${name} | ${s.toFixed(2)} | ${Math.round(ROWS / s).toLocaleString('en-US')} | ` +
          `${mb(median(results.map((r) => r.bytes)))} | ${mb(median(results.map((r) => r.peakRss)))} | ` +
          `${mb(median(results.map((r) => r.peakHeap)))} | ${mb(median(results.map((r) => r.peakExternal)))} | ${check} |`,
      );
    }
    const base = spawnSync(
      process.execPath,
      [
        '-e',
        "console.log(/VmHWM:\\s+(\\d+)/.exec(require('fs').readFileSync('/proc/self/status','utf8'))[1]*1024)",
      ],
      { encoding: 'utf8' },
    );
    console.log(
      `\n(an empty node process peaks at ${mb(Number(base.stdout))} MB RSS; load average ${load()})`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// --postgres: COPY vs pg-cursor vs pg-cursor + encoder, rows made by PostgreSQL.

const DATABASE_URL = process.env.BENCH_DATABASE_URL || 'postgresql://root@127.0.0.1:5432/test';
const PG_QUERY = `select g::int as id, g::bigint * 2147483647 as big,
  (g % 100000)::numeric + (g % 100)::numeric / 100 as amount, 'label ' || g || ' é' as label,
  timestamptz '2024-01-01' + g * interval '1.337 second' as created, g % 2 = 0 as active,
  jsonb_build_object('n', g % 1000, 'tag', 'x', 'ok', g % 3 = 0) as doc, g / 7.0::float8 as score,
  case when g % 20 = 0 then 'note ' || g end as note
  from generate_series(1, ${ROWS}) g`;

async function pgChild(mode) {
  const pg = require('pg');
  const Cursor = require('pg-cursor');
  const raw = { getTypeParser: () => (v) => v };
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  await client.query("SET TimeZone = 'UTC'; SET DateStyle = 'ISO'; SET IntervalStyle = 'postgres'");
  await client.query('BEGIN');
  const t = performance.now();
  const cursor = client.query(new Cursor(PG_QUERY, [], { rowMode: 'array', types: raw }));
  let rows = await cursor.read(CHUNK);
  let encoder;
  let bytes = 0;
  if (mode !== 'cursor') {
    const columns = cursor._result.fields.map((f) => ({
      name: f.name,
      type: f.dataTypeID === 1184 ? 'timestamp with time zone' : 'x',
      oid: f.dataTypeID,
      json: (v) => v,
    }));
    const [file, name] =
      mode === 'arrow'
        ? ['arrow.encoder.js', 'ArrowEncoder']
        : ['parquet.encoder.js', 'ParquetEncoder'];
    const { [name]: Encoder } = require(join(FORMATS_DIR, file));
    // BENCH_ROW_GROUP_MB: the Parquet encoder's rowGroupBytes (default: the encoder's own)
    const groupMb = Number(process.env.BENCH_ROW_GROUP_MB) || undefined;
    encoder = new Encoder(
      { queryId: 'bench', layout: 'array', columns },
      groupMb ? { rowGroupBytes: groupMb * MB } : undefined,
    );
    bytes += encoder.head().length;
  }
  let n = 0;
  while (rows.length > 0) {
    n += rows.length;
    if (encoder) bytes += encoder.rows(RowBatch.fromText(rows)).length;
    rows = await cursor.read(CHUNK);
  }
  if (encoder)
    bytes += encoder.end({ reason: 'OK', sql_state: '00000', vendor_code: 0 }, false).length;
  const ms = performance.now() - t;
  await cursor.close();
  await client.query('COMMIT');
  await client.end();
  console.log(JSON.stringify({ ms, rows: n, bytes, peakRss: peakRss() }));
}

function copyOnce() {
  const t = performance.now();
  const res = spawnSync(
    'psql',
    [DATABASE_URL, '-qAtc', `COPY (${PG_QUERY.replace(/\s+/g, ' ')}) TO STDOUT`],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: childTimeout(),
    },
  );
  if (res.status !== 0) throw new Error(`psql: ${res.stderr}`);
  return performance.now() - t;
}

async function postgresBench() {
  const modes = [
    ['COPY … TO STDOUT (psql, output discarded)', null],
    ['pg-cursor, text values, no encoding', 'cursor'],
    ['pg-cursor + ParquetEncoder', 'parquet'],
    ['pg-cursor + ArrowEncoder', 'arrow'],
  ];
  console.log(
    `# ${ROWS} rows made by PostgreSQL (${DATABASE_URL.replace(/\/\/[^@]*@/, '//')}), fetch ${CHUNK}, ` +
      `${RUNS} runs (best time, median memory), load average ${load()}\n`,
  );
  console.log('| path | s | rows/s | vs COPY | MB out | peak RSS MB |');
  console.log('|---|---:|---:|---:|---:|---:|');
  let copyMs;
  for (const [label, mode] of modes) {
    const results = [];
    for (let run = 0; run < RUNS; run++) {
      await yieldToTimers();
      if (mode === null) {
        results.push({ ms: copyOnce(), bytes: 0, peakRss: 0 });
        continue;
      }
      const res = spawnSync(
        process.execPath,
        [fileURLToPath(import.meta.url), '--pg-child', mode],
        {
          env: { ...process.env, NODE_PATH: nodePath() },
          encoding: 'utf8',
          timeout: childTimeout(),
        },
      );
      const line = res.stdout.trim().split('\n').pop();
      if (res.status !== 0 || !line?.startsWith('{')) throw new Error(`${label}: ${res.stderr}`);
      results.push(JSON.parse(line));
    }
    const ms = best(results.map((r) => r.ms));
    copyMs ??= ms;
    console.log(
      `| ${label} | ${(ms / 1000).toFixed(2)} | ${Math.round(ROWS / (ms / 1000)).toLocaleString('en-US')} | ` +
        `${(copyMs / ms).toFixed(2)}× | ${mode === null || mode === 'cursor' ? '—' : mb(median(results.map((r) => r.bytes)))} | ` +
        `${mode === null ? '—' : mb(median(results.map((r) => r.peakRss)))} |`,
    );
  }
}

if (process.argv[2] === '--child') {
  await child(process.argv[3], process.argv[4]);
} else if (process.argv[2] === '--pg-child') {
  await pgChild(process.argv[3]);
} else if (process.argv[2] === '--postgres') {
  limitTo(4 * RUNS);
  await postgresBench();
} else {
  const names = process.argv.slice(2);
  for (const n of names) if (!(n in CANDIDATES)) throw new Error(`unknown candidate ${n}`);
  const built = existsDist();
  if (built && !process.env.SLUICE_FORMATS_DIR) warnIfStale();
  if (!built)
    console.log(`(no ${FORMATS_DIR}/parquet.encoder.js: npm run build for the sluice rows)\n`);
  const chosen = names.length
    ? names
    : Object.keys(CANDIDATES).filter((n) => built || !n.includes('sluice'));
  limitTo(chosen.length * RUNS);
  await parent(chosen);
}

function existsDist() {
  try {
    statSync(join(FORMATS_DIR, 'parquet.encoder.js'));
    return true;
  } catch {
    return false;
  }
}
