// Large results (issues 3 and 39): 1M rows of mixed types through the whole service (api + worker,
// BullMQ, Redis Streams) in every response format, against PostgreSQL's floor on the same run:
// `COPY … TO STDOUT` read in this process with pg-copy-streams (the "× COPY" ratios), the same
// COPY read by psql (a reference only: on 1M rows psql took about 3.6 s for what pg-copy-streams
// reads in about 1.0 s, which made earlier ratios look better than they were), and a direct
// pg-cursor + JSON.stringify NDJSON loop in this process. stream+json is read twice: once only
// counting bytes, once parsing every line. Run by hand (never in CI):
//
//   npm run build && node bench/large-result.mjs
//
// The rows come from a stored table (BENCH_SOURCE=table, the default), made in the set-up with the
// issue's mix — int, bigint, numeric, md5 text, timestamptz, bool, jsonb, float8 and a text that is
// 95% NULL — and dropped at the end unless BENCH_KEEP_TABLE=1 (a later run reuses it): a statement
// whose rows PostgreSQL computes makes PostgreSQL the bottleneck and hides Sluice's own cost.
// BENCH_TABLE names it (two benches at once on one database need two names). BENCH_SOURCE=generated
// runs the older generate_series statement instead. Requests carry no
// fetch_size unless BENCH_FETCH_SIZE is set (the service's default then decides), and Sluice runs
// with its default settings. BENCH_PATHS (e.g. `copy,ndjson,ndjson-parsed,parquet`) runs some
// paths only: copy, psql, direct, json, ndjson, ndjson-parsed, csv, parquet, arrow.
//
// Each path is run BENCH_RUNS times (rounds, one path after the other, so that noise spreads over
// all of them) and the medians are reported; a new round only starts if it fits in the time budget.
// The whole body is read and counted; the worker's RSS is sampled every 100 ms during each Sluice
// run. Everything it starts (child processes, Redis keys, the table) is removed at the end, also on
// error, on Ctrl-C and at the hard time limit. See bench/README.md for the settings.
import { spawn } from 'node:child_process';
import { finished } from 'node:stream/promises';
import { StringDecoder } from 'node:string_decoder';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import Cursor from 'pg-cursor';
import {
  DATABASE_URL,
  cpuLine,
  cpuPercent,
  cpuSnapshot,
  envInt,
  installGuards,
  onCleanup,
  loadAverage,
  mb,
  median,
  met,
  printChildOutput,
  reportHeader,
  rssBytes,
  sampleRss,
  sluiceCpuGroups,
  staleBuildWarning,
  runMain,
  startSluice,
  unlessDied,
  executeRequest,
  storedTable,
} from './lib/service.mjs';
import { createStoredTable, exportStatement, storedTableName } from './lib/exports.mjs';

const ROWS = envInt('BENCH_ROWS', 1_000_000);
const RUNS = envInt('BENCH_RUNS', 3);
const BUDGET_SECONDS = envInt('BENCH_BUDGET_SECONDS', 330);
const RUN_TIMEOUT_MS = envInt('BENCH_RUN_TIMEOUT_SECONDS', 120) * 1000;
/** Rows a request asks for a chunk (fetch_size); absent: none sent, the service's default. */
const FETCH_SIZE = process.env.BENCH_FETCH_SIZE ? envInt('BENCH_FETCH_SIZE', 1000) : undefined;
/** Rows a read of the direct pg-cursor path (the service's default fetch size). */
const DIRECT_FETCH = FETCH_SIZE ?? 1000;
const SOURCE = process.env.BENCH_SOURCE || 'table';
if (!['table', 'generated'].includes(SOURCE))
  throw new Error('BENCH_SOURCE must be table or generated');
const KEEP_TABLE = process.env.BENCH_KEEP_TABLE === '1';
const PATHS = process.env.BENCH_PATHS
  ? new Set(process.env.BENCH_PATHS.split(',').map((p) => p.trim()))
  : undefined;
const wanted = (kind) => !PATHS || PATHS.has(kind);
/** off (default): values as PostgreSQL's text; on: pg's type parsers; both: two direct paths. */
const DIRECT_TYPE_PARSING = process.env.BENCH_DIRECT_TYPE_PARSING || 'off';
if (!['off', 'on', 'both'].includes(DIRECT_TYPE_PARSING))
  throw new Error('BENCH_DIRECT_TYPE_PARSING must be off, on or both');

// Issue 39's goals, on the stored table.
const GOAL_NDJSON_RATIO = 0.7;
const GOAL_NDJSON_PARSED_RATIO = 0.55;
const GOAL_PARQUET_RATIO = 0.4;
/** The worker's peak RSS during one Parquet export. */
const GOAL_WORKER_PEAK_MB = 250;
/** Any format: what one query adds to the worker's RSS. */
const GOAL_WORKER_MB = 200;

installGuards((BUDGET_SECONDS + 150) * 1000);

/** The stored table of issue 39's mix: its last column is a text, 95% NULL. */
const TABLE = process.env.BENCH_TABLE || storedTableName(ROWS);
const CREATE_TABLE = createStoredTable(TABLE, ROWS);
const statement = (n) =>
  SOURCE === 'table'
    ? `select * from ${TABLE}${n === ROWS ? '' : ` limit ${n}`}`
    : exportStatement(n);
const SQL = statement(ROWS);
/** What the COPY floors read: the table itself, or the statement. */
const COPY_SOURCE = SOURCE === 'table' ? TABLE : `(${SQL})`;

/** Makes the table unless it is there with its rows; drops it at the end unless kept. */
async function setUpTable() {
  if (SOURCE !== 'table') return;
  await storedTable(TABLE, CREATE_TABLE, { keep: KEEP_TABLE });
}

const FORMATS = [
  { label: 'Sluice application/json', accept: 'application/json', kind: 'json' },
  {
    label: 'Sluice application/stream+json, client counting bytes',
    accept: 'application/stream+json',
    kind: 'ndjson',
  },
  {
    label: 'Sluice application/stream+json, client parsing every line',
    accept: 'application/stream+json',
    kind: 'ndjson-parsed',
  },
  { label: 'Sluice text/csv', accept: 'text/csv', kind: 'csv' },
  { label: 'Sluice application/parquet', accept: 'application/parquet', kind: 'parquet' },
  {
    label: 'Sluice application/vnd.apache.arrow.stream',
    accept: 'application/vnd.apache.arrow.stream',
    kind: 'arrow',
  },
];

function countNewlines(buf) {
  let n = 0;
  let i = -1;
  while ((i = buf.indexOf(10, i + 1)) !== -1) n++;
  return n;
}

// ---------------------------------------------------------------------------------------------
// The floors

/**
 * The floor: COPY … TO STDOUT over one pg connection of this process, read with pg-copy-streams,
 * bytes and newlines (one per row) counted. The CPU snapshot (`finish`) is taken before the
 * connection closes, so that its backend is still there.
 */
async function runCopy(finish) {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    const started = performance.now();
    const stream = client.query(copyTo(`COPY ${COPY_SOURCE} TO STDOUT`));
    let bytes = 0;
    let rows = 0;
    stream.on('data', (c) => {
      bytes += c.length;
      rows += countNewlines(c);
    });
    await finished(stream);
    const seconds = (performance.now() - started) / 1000;
    return { seconds, bytes, rows, cpu: finish() };
  } finally {
    await client.end();
  }
}

/**
 * A reference, not the floor: psql runs the same COPY; its stdout is read here and counted (one line
 * per row). The COPY is done when the last row has arrived; psql then sleeps 0.3 s before it exits,
 * so that its backend and psql itself are still there for the CPU snapshot (`finish`).
 */
function runPsqlCopy(finish) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(
      'psql',
      [
        DATABASE_URL,
        '-X',
        '-q',
        '-v',
        'ON_ERROR_STOP=1',
        '-c',
        `COPY ${COPY_SOURCE} TO STDOUT`,
        '-c',
        'select pg_sleep(0.3)',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let bytes = 0;
    let rows = 0;
    let result;
    let stderr = '';
    child.stdout.on('data', (c) => {
      if (result) return; // the pg_sleep's output
      bytes += c.length;
      rows += countNewlines(c);
      if (rows >= ROWS) {
        result = { seconds: (performance.now() - started) / 1000, bytes, rows: ROWS };
        result.cpu = finish({ psql: [child.pid] });
      }
    });
    child.stderr.on('data', (c) => (stderr += c));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`psql exited ${code}: ${stderr.trim()}`));
      if (!result) return reject(new Error(`COPY gave ${rows} rows, not ${ROWS}`));
      resolve(result);
    });
  });
}

/** pg-cursor, 1,000 rows a read, rows in array mode turned into NDJSON lines with JSON.stringify. */
async function runDirect(typeParsing, finish) {
  const client = new pg.Client({
    connectionString: DATABASE_URL,
    // Off: every value stays PostgreSQL's text form (what Sluice's worker reads).
    ...(typeParsing ? {} : { types: { getTypeParser: () => (v) => v } }),
  });
  await client.connect();
  try {
    const started = performance.now();
    await client.query('begin');
    const cursor = client.query(new Cursor(SQL, [], { rowMode: 'array' }));
    let bytes = 0;
    let rows = 0;
    for (;;) {
      const batch = await cursor.read(DIRECT_FETCH);
      if (batch.length === 0) break;
      let chunk = '';
      for (const row of batch) chunk += `${JSON.stringify(row)}\n`;
      bytes += Buffer.byteLength(chunk);
      rows += batch.length;
    }
    await cursor.close();
    await client.query('commit');
    const seconds = (performance.now() - started) / 1000;
    return { seconds, bytes, rows, cpu: finish() }; // before the backend goes
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------
// Through Sluice

// What the client does with a body while reading it, besides counting its bytes: each reader keeps
// only what the row count check needs afterwards (`rowsOf`).

/** The whole body: binary formats, and any answer but 200. */
function keepBody() {
  const chunks = [];
  return { add: (c) => chunks.push(c), done: () => ({ body: Buffer.concat(chunks) }) };
}

/** Lines: CSV, one per row plus the header. */
function countLines() {
  let lines = 0;
  return { add: (c) => (lines += countNewlines(c)), done: () => ({ lines }) };
}

/**
 * The last 64 KiB or more, for the final status of the JSON formats. The last chunks are kept as
 * they are, not copied, so that the client does little more than count bytes.
 */
function keepTail(size = 65536) {
  const chunks = [];
  let kept = 0;
  return {
    add(c) {
      chunks.push(c);
      kept += c.length;
      while (kept - chunks[0].length >= size) kept -= chunks.shift().length;
    },
    done: () => ({ tail: Buffer.concat(chunks).toString('utf8') }),
  };
}

/**
 * A client that uses stream+json: splits the body into lines (a line may span chunks, a chunk may
 * end inside a character) and JSON.parse's each one; rows are counted from the parsed `data`
 * arrays. A line that does not parse throws, which makes the response an error.
 */
function parseLines({ keep = keepParsedBody } = {}) {
  const decoder = new StringDecoder('utf8');
  let partial = '';
  let rows = 0;
  let finalStatus;
  // The body as it came, for the parse alone (parseAlone) after the rounds: the last run's only.
  const chunks = keep ? (parsedBody = []) : undefined;
  return {
    add(c) {
      chunks?.push(c);
      const text = partial + decoder.write(c);
      if (c.indexOf(10) === -1) {
        partial = text; // no line ends here: do not split the whole line so far again
        return;
      }
      const lines = text.split('\n');
      partial = lines.pop();
      for (const line of lines) {
        const value = JSON.parse(line);
        if (Array.isArray(value.data)) rows += value.data.length;
        else if (value.status) finalStatus = value.status;
      }
    },
    done: () => ({ parsedRows: rows, finalStatus, unterminated: partial + decoder.end() }),
  };
}

/** The last stream+json body the parsing client read while keepParsedBody, as its chunks came. */
let parsedBody;
let keepParsedBody = false;

/**
 * The parsing client's own share of its path: one more stream+json read of the statement (not
 * timed, its chunks kept), then the same reader over that body three times with the service idle,
 * so that the run shows how much of the goal's time the client itself takes (its JSON.parse of
 * every line, on one core) before Sluice or PostgreSQL do anything. The median pass.
 */
async function parseAlone(sluice) {
  const format = FORMATS.find((f) => f.kind === 'ndjson-parsed');
  keepParsedBody = true;
  const res = await fetchAll(sluice, format, SQL).finally(() => (keepParsedBody = false));
  const check = await rowsOf(format, res);
  if (check.error) throw new Error(`${format.label}, kept for the parse alone: ${check.error}`);
  await sleep(1000);
  const seconds = [];
  let rows = 0;
  for (let pass = 0; pass < 3; pass++) {
    const started = performance.now();
    const reader = parseLines({ keep: false });
    for (const c of parsedBody) reader.add(c);
    seconds.push((performance.now() - started) / 1000);
    rows = reader.done().parsedRows;
  }
  parsedBody = undefined;
  if (rows !== ROWS) throw new Error(`the client's parse alone: ${rows} rows, not ${ROWS}`);
  return median(seconds);
}

const READERS = {
  json: keepTail,
  ndjson: keepTail,
  'ndjson-parsed': parseLines,
  csv: countLines,
  parquet: keepBody,
  arrow: keepBody,
};

/** POSTs the statement and reads the whole body, counting bytes, with the format's reader. */
function fetchAll(sluice, format, sql, timeoutMs = RUN_TIMEOUT_MS) {
  return new Promise((resolve) => {
    const body = Buffer.from(
      JSON.stringify({ statement: sql, ...(FETCH_SIZE ? { fetch_size: FETCH_SIZE } : {}) }),
    );
    const started = performance.now();
    const req = executeRequest(sluice, body, format.accept, (res) => {
      const firstByte = performance.now();
      let bytes = 0;
      const reader = res.statusCode === 200 ? READERS[format.kind]() : keepBody();
      res.on('data', (c) => {
        bytes += c.length;
        try {
          reader.add(c);
        } catch (err) {
          resolve({ status: res.statusCode, error: `unreadable body: ${err.message}`, bytes });
          res.destroy();
        }
      });
      res.on('end', () =>
        resolve({
          status: res.statusCode,
          seconds: (performance.now() - started) / 1000,
          ttfb: (firstByte - started) / 1000,
          bytes,
          ...reader.done(),
        }),
      );
      res.on('error', (err) =>
        resolve({ status: res.statusCode, error: `response: ${err.message}`, bytes }),
      );
      res.on('aborted', () =>
        resolve({ status: res.statusCode, error: 'response aborted', bytes }),
      );
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`not done in ${timeoutMs / 1000} s`)));
    req.on('error', (err) => resolve({ status: 0, error: `request: ${err.message}` }));
    req.end(body);
  });
}

/** Rows the body holds, or an error message. */
async function rowsOf(format, res) {
  if (res.error) return { error: res.error };
  if (res.status !== 200)
    return { error: `HTTP ${res.status}: ${res.body?.toString('utf8').slice(0, 300)}` };
  try {
    switch (format.kind) {
      case 'json':
      case 'ndjson': {
        const m = /"status":(\{[^}]*\})\}?\s*$/.exec(res.tail);
        if (!m) return { error: 'no final status' };
        const status = JSON.parse(m[1]);
        if (status.sql_state !== '00000') return { error: `status ${JSON.stringify(status)}` };
        return { rows: status.row_count };
      }
      case 'ndjson-parsed': {
        if (res.unterminated) return { error: 'the last line has no newline' };
        const status = res.finalStatus;
        if (!status) return { error: 'no final status' };
        if (status.sql_state !== '00000') return { error: `status ${JSON.stringify(status)}` };
        if (status.row_count !== res.parsedRows)
          return { error: `${res.parsedRows} rows parsed, the status says ${status.row_count}` };
        return { rows: res.parsedRows };
      }
      case 'csv':
        return { rows: res.lines - 1 }; // header line
      case 'parquet': {
        const { parquetMetadata } = await import('hyparquet');
        const buf = res.body;
        const meta = parquetMetadata(
          buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength),
        );
        return { rows: Number(meta.num_rows) };
      }
      case 'arrow': {
        const { tableFromIPC } = await import('apache-arrow');
        return { rows: tableFromIPC(res.body).numRows };
      }
    }
  } catch (err) {
    return { error: `unreadable body: ${err instanceof Error ? err.message : err}` };
  }
  return { error: 'unknown format' };
}

/** One Sluice run with the worker's and the api's RSS sampled and the CPU of every process. */
async function runSluice(sluice, format) {
  // Let the previous run's garbage settle a little: idle RSS is taken just before the request.
  await sleep(1000);
  const idle = { worker: rssBytes(sluice.worker.pid), api: rssBytes(sluice.api.pid) };
  const groups = sluiceCpuGroups(sluice);
  const cpuBefore = cpuSnapshot(groups);
  const sampler = sampleRss([sluice.worker.pid, sluice.api.pid], 100);
  const res = await unlessDied(sluice, fetchAll(sluice, format, SQL));
  const rss = sampler.stop();
  const cpu = cpuPercent(cpuBefore, cpuSnapshot(groups));
  const check = await rowsOf(format, res);
  if (check.error) throw new Error(`${format.label}: ${check.error}`);
  if (check.rows !== ROWS) throw new Error(`${format.label}: ${check.rows} rows, not ${ROWS}`);
  return {
    seconds: res.seconds,
    ttfb: res.ttfb,
    bytes: res.bytes,
    rows: check.rows,
    cpu,
    workerIdle: idle.worker,
    workerPeak: rss[sluice.worker.pid].peak,
    apiIdle: idle.api,
    apiPeak: rss[sluice.api.pid].peak,
  };
}

/** 406 means the build does not produce the format; anything else but 200 is a failure. */
async function available(sluice, format) {
  const res = await fetchAll(sluice, format, statement(10), 30_000);
  if (res.status === 406) return false;
  const check = await rowsOf(format, res);
  if (check.error) throw new Error(`${format.label} on 10 rows: ${check.error}`);
  return true;
}

/** CPU of the floors: the bench process and PostgreSQL, snapshot taken by the run (`finish`). */
function withCpu(run) {
  return async () => {
    await sleep(500);
    const groups = { 'bench process': [process.pid], postgres: 'postgres' };
    const before = cpuSnapshot(groups);
    const finish = (more = {}) => cpuPercent(before, cpuSnapshot({ ...groups, ...more }));
    return run(finish);
  };
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const loadAtStart = loadAverage();
  const warning = staleBuildWarning();
  if (warning) console.error(warning);
  const began = performance.now();

  await setUpTable();
  const sluice = await startSluice();
  // Before any query: what the worker and its pool threads hold for loading their code.
  const workerStartRss = rssBytes(sluice.worker.pid);
  // The floor always runs: every ratio is taken against it.
  const targets = [
    {
      label: 'PostgreSQL COPY … TO STDOUT, pg-copy-streams in process (floor)',
      floor: true,
      run: withCpu(runCopy),
    },
  ];
  if (wanted('psql'))
    targets.push({
      label: 'PostgreSQL COPY … TO STDOUT via psql (reference only)',
      run: withCpu(runPsqlCopy),
    });
  if (DIRECT_TYPE_PARSING !== 'on' && wanted('direct'))
    targets.push({
      label: 'direct pg-cursor + JSON.stringify NDJSON, type parsing off',
      run: withCpu((finish) => runDirect(false, finish)),
    });
  if (DIRECT_TYPE_PARSING !== 'off' && wanted('direct'))
    targets.push({
      label: 'direct pg-cursor + JSON.stringify NDJSON, type parsing on',
      run: withCpu((finish) => runDirect(true, finish)),
    });
  const unavailable = [];
  for (const format of FORMATS.filter((f) => wanted(f.kind))) {
    if (await available(sluice, format)) {
      targets.push({ label: format.label, format, run: () => runSluice(sluice, format) });
    } else {
      unavailable.push(format);
      console.log(`${format.label}: 406, not available in this build`);
    }
  }

  const results = new Map(targets.map((t) => [t, []]));
  let lastRound = 0;
  for (let round = 1; round <= RUNS; round++) {
    const elapsed = (performance.now() - began) / 1000;
    if (round > 1 && elapsed + lastRound * 1.1 > BUDGET_SECONDS) {
      console.log(
        `round ${round} would not fit in the ${BUDGET_SECONDS} s budget: stopping at ${round - 1}`,
      );
      break;
    }
    const roundStart = performance.now();
    for (const target of targets) {
      process.stdout.write(`round ${round}: ${target.label} ... `);
      let r;
      try {
        r = await target.run();
      } catch (err) {
        printChildOutput(sluice);
        throw err;
      }
      if (r.rows !== ROWS) throw new Error(`${target.label}: ${r.rows} rows, not ${ROWS}`);
      results.get(target).push(r);
      const extra = target.format
        ? `, worker RSS +${mb(r.workerPeak - r.workerIdle)} MB (peak ${mb(r.workerPeak)}), api +${mb(r.apiPeak - r.apiIdle)} MB`
        : '';
      console.log(
        `${r.seconds.toFixed(2)} s, ${Math.round(ROWS / r.seconds)} rows/s, ${mb(r.bytes)} MB${extra}`,
      );
    }
    lastRound = (performance.now() - roundStart) / 1000;
  }

  const parseAloneSeconds = targets.some((t) => t.format?.kind === 'ndjson-parsed')
    ? await parseAlone(sluice)
    : undefined;
  report({ targets, results, unavailable, loadAtStart, workerStartRss, parseAloneSeconds });
}

function runsText(summary) {
  const lo = Math.min(...summary.map((s) => s.runs));
  const hi = Math.max(...summary.map((s) => s.runs));
  return lo === hi ? `${lo} run${lo === 1 ? '' : 's'}` : `${lo}–${hi} runs`;
}

function report({ targets, results, unavailable, loadAtStart, workerStartRss, parseAloneSeconds }) {
  const summary = targets.map((t) => {
    const runs = results.get(t);
    const seconds = median(runs.map((r) => r.seconds));
    // CPU and memory of the run whose time is the median (or nearest to it).
    const mid = [...runs].sort(
      (a, b) => Math.abs(a.seconds - seconds) - Math.abs(b.seconds - seconds),
    )[0];
    return {
      target: t,
      runs: runs.length,
      seconds,
      rowsPerSecond: ROWS / seconds,
      bytes: median(runs.map((r) => r.bytes)),
      ttfb: median(runs.map((r) => r.ttfb)),
      workerDelta: Math.max(...runs.map((r) => (r.workerPeak ?? NaN) - (r.workerIdle ?? NaN))),
      workerPeak: Math.max(...runs.map((r) => r.workerPeak ?? NaN)),
      apiDelta: Math.max(...runs.map((r) => (r.apiPeak ?? NaN) - (r.apiIdle ?? NaN))),
      cpu: mid.cpu,
    };
  });
  const copy = summary.find((s) => s.target.floor);
  const byKind = (kind) => summary.find((s) => s.target.format?.kind === kind);
  const ratio = (s) => s.rowsPerSecond / copy.rowsPerSecond;

  const out = [
    ...reportHeader(`Large result, ${ROWS.toLocaleString('en-US')} rows`, loadAtStart),
    SOURCE === 'table'
      ? `- Statement: \`${SQL}\`, a stored table (${ROWS.toLocaleString('en-US')} rows: int, bigint, numeric(20,6), md5 text, timestamptz, bool, jsonb, float8, a text 95% NULL; \`${CREATE_TABLE}\`); the COPY floors read \`COPY ${TABLE} TO STDOUT\``
      : `- Statement: the mixed-type select of bench/large-result.mjs (int, bigint, numeric(20,6), md5 text, timestamptz, bool, jsonb, float8, a mostly-NULL int) over generate_series(1, ${ROWS})`,
    `- Sluice at its default settings; ${FETCH_SIZE ? `fetch_size ${FETCH_SIZE} in each request` : 'no fetch_size in the requests (the default, SLUICE_DEFAULT_FETCH_SIZE, decides)'}; medians of ${runsText(summary)} per path, in rounds; every body read in full by a node:http client in the bench process`,
    `- COPY floor ("× COPY" is relative to it): \`COPY ${COPY_SOURCE} TO STDOUT\` on one pg connection of the bench process, read with pg-copy-streams, bytes and lines counted; the psql row runs the same COPY through \`psql\` (stdout read by the bench), for comparison with earlier figures only`,
    `- stream+json twice: the client counting bytes (keeping the last chunks for the final status), and the client splitting the body into lines and \`JSON.parse\`-ing each one (rows counted from the parsed \`data\` arrays); after the rounds, that client's parse alone: one more such read kept whole (not timed), then the same reader over it with the service idle`,
    `- Direct path: in the bench process, pg-cursor (array rows, ${DIRECT_FETCH} a read), type parsing ${DIRECT_TYPE_PARSING === 'both' ? 'off and on' : DIRECT_TYPE_PARSING}, one \`JSON.stringify(row)\` line per row, bytes counted, not sent anywhere`,
    `- Memory: worker (and api) RSS from /proc/<pid>/status every 100 ms; "+MB" is peak minus RSS just before the request (largest over the runs); worker RSS right after start, before any query: ${mb(workerStartRss)} MB`,
    '',
    '| path | runs | median s | rows/s | × COPY | body MB | MB/s | first byte s | worker RSS +MB (peak) | api RSS +MB |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const s of summary) {
    const sluiceCols = s.target.format
      ? `${mb(s.workerDelta)} (${mb(s.workerPeak)}) | ${mb(s.apiDelta)}`
      : '– | –';
    out.push(
      `| ${s.target.label} | ${s.runs} | ${s.seconds.toFixed(2)} | ${Math.round(s.rowsPerSecond).toLocaleString('en-US')} | ${ratio(s).toFixed(2)} | ${mb(s.bytes)} | ${(s.bytes / 2 ** 20 / s.seconds).toFixed(0)} | ${s.target.format ? s.ttfb.toFixed(2) : '–'} | ${sluiceCols} |`,
    );
  }
  for (const f of unavailable) out.push(`| ${f.label} | – | not available (406) | | | | | | | |`);

  out.push('', 'Goals:', '');
  const ndjsonGoals = [
    ['ndjson', 'stream+json, client counting bytes', GOAL_NDJSON_RATIO],
    ['ndjson-parsed', 'stream+json, client parsing every line', GOAL_NDJSON_PARSED_RATIO],
  ];
  for (const [kind, what, goal] of ndjsonGoals) {
    const s = byKind(kind);
    if (s)
      out.push(`- ${what} ≥ ${goal}× COPY: **${ratio(s).toFixed(2)}×** — ${met(ratio(s) >= goal)}`);
    if (s && kind === 'ndjson-parsed' && parseAloneSeconds !== undefined)
      out.push(
        `  - the client's parse alone (the same reader over the last body it read, the service idle, median of 3): ${parseAloneSeconds.toFixed(2)} s = ${(copy.seconds / parseAloneSeconds).toFixed(2)}× COPY, ${((100 * parseAloneSeconds) / (copy.seconds / goal)).toFixed(0)}% of the ${(copy.seconds / goal).toFixed(2)} s the goal allows the whole path`,
      );
  }
  const parquet = byKind('parquet');
  if (parquet) {
    out.push(
      `- Parquet (default: ZSTD) ≥ ${GOAL_PARQUET_RATIO}× COPY: **${ratio(parquet).toFixed(2)}×** — ${met(ratio(parquet) >= GOAL_PARQUET_RATIO)}`,
      `- Worker peak RSS during one Parquet export < ${GOAL_WORKER_PEAK_MB} MB: **${mb(parquet.workerPeak)} MB** (+${mb(parquet.workerDelta)} MB for the query) — ${met(parquet.workerPeak < GOAL_WORKER_PEAK_MB * 2 ** 20)}`,
    );
  } else if (wanted('parquet')) {
    out.push(
      `- Parquet goals (≥ ${GOAL_PARQUET_RATIO}× COPY, worker peak < ${GOAL_WORKER_PEAK_MB} MB): not measurable, Parquet is not available (406)`,
    );
  }
  const sluiceRuns = summary.filter((s) => s.target.format);
  const worst = sluiceRuns.reduce((a, b) => (b.workerDelta > a.workerDelta ? b : a), sluiceRuns[0]);
  if (worst)
    out.push(
      `- Largest worker RSS growth over all formats: +${mb(worst.workerDelta)} MB (${worst.target.label}) — under ${GOAL_WORKER_MB} MB: ${met(worst.workerDelta < GOAL_WORKER_MB * 2 ** 20)}`,
    );
  out.push('', 'CPU during the median run (100% = one core):', '');
  for (const s of summary) out.push(`- ${s.target.label}: ${cpuLine(s.cpu ?? {})}`);
  console.log(`\n${out.join('\n')}\n`);
}

await runMain(main);
