// Cancel latency (issue 5): how long a running statement keeps its PostgreSQL backend busy after its
// client goes away, or after DELETE /v1/queries/{id}. N times each: start `select pg_sleep(30)` (a
// marker in its column name), find its query id in GET /v1/queries, wait until its backend shows in
// pg_stat_activity (application_name = 'sluice:<query id>'), then cancel and poll pg_stat_activity
// every few milliseconds until that backend is no longer running it. Run by hand:
//
//   npm run build && node bench/cancel-latency.mjs
//
// Bounded in time (a cancel that does not land within BENCH_CANCEL_TIMEOUT_MS is counted as failed
// and the backend is cancelled by the bench). Everything it starts is removed at the end, also on
// error and on Ctrl-C.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import {
  DATABASE_URL,
  envInt,
  installGuards,
  loadAverage,
  met,
  ms,
  onCleanup,
  percentile,
  printChildOutput,
  reportHeader,
  request,
  runMain,
  staleBuildWarning,
  startSluice,
  unlessDied,
  executeRequest,
} from './lib/service.mjs';

const N = envInt('BENCH_ITERATIONS', 30);
const CANCEL_TIMEOUT_MS = envInt('BENCH_CANCEL_TIMEOUT_MS', 5000);
const POLL_MS = 2;
const GOAL_P99_MS = 500;

installGuards((2 * N * (CANCEL_TIMEOUT_MS + 12_000) + 60_000) | 0);

const tag = randomBytes(4).toString('hex');

/** Starts the statement; resolves `response` when the HTTP exchange ends one way or another. */
function startStatement(sluice, marker) {
  const body = Buffer.from(JSON.stringify({ statement: `select pg_sleep(30) as ${marker}` }));
  let resolveResponse;
  const response = new Promise((resolve) => (resolveResponse = resolve));
  const req = executeRequest(sluice, body, undefined, (res) => {
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (c) => (text += c));
    res.on('end', () => resolveResponse({ status: res.statusCode, body: text }));
    res.on('error', (err) => resolveResponse({ status: res.statusCode, body: err.message }));
    res.on('aborted', () => resolveResponse({ status: res.statusCode, body: 'aborted' }));
  });
  req.on('error', (err) => resolveResponse({ status: 0, body: err.message }));
  req.end(body);
  return { req, response };
}

/** The query id of the statement with this marker, once GET /v1/queries shows it running. */
async function findRunning(sluice, marker, deadline) {
  while (performance.now() < deadline) {
    const res = await request(new URL('/v1/queries', sluice.baseUrl), { headers: sluice.headers });
    if (res.status === 200) {
      const q = JSON.parse(res.body).find((r) => r.statement?.includes(marker));
      if (q?.state === 'running' || q?.state === 'streaming') return q.query_id;
      if (q && ['failed', 'cancelled', 'succeeded'].includes(q.state))
        throw new Error(`query ${q.query_id} ended (${q.state}) before it was cancelled`);
    }
    await sleep(20);
  }
  throw new Error(`no running query with marker ${marker} in GET /v1/queries`);
}

/** pid of the backend running this query (application_name set by the worker), or undefined. */
async function backendOf(db, queryId) {
  const { rows } = await db.query(
    "select pid from pg_stat_activity where application_name = $1 and state = 'active'",
    [`sluice:${queryId}`],
  );
  return rows[0]?.pid;
}

async function once(sluice, db, mode, i) {
  const marker = `bench_cancel_${tag}_${mode === 'DELETE' ? 'del' : 'disc'}_${i}`;
  const { req, response } = startStatement(sluice, marker);
  const deadline = performance.now() + 10_000;
  const queryId = await findRunning(sluice, marker, deadline);
  let pid;
  while (!(pid = await backendOf(db, queryId))) {
    if (performance.now() > deadline) throw new Error(`query ${queryId}: no backend seen`);
    await sleep(5);
  }
  // Let pg_sleep be well under way.
  await sleep(50);

  const t0 = performance.now();
  let deleteAnswer;
  if (mode === 'DELETE') {
    deleteAnswer = request(new URL(`/v1/queries/${queryId}`, sluice.baseUrl), {
      method: 'DELETE',
      headers: sluice.headers,
    }).then((r) => ({ ...r, ms: performance.now() - t0 }));
  } else {
    req.destroy();
  }
  let latency = NaN;
  while (performance.now() - t0 < CANCEL_TIMEOUT_MS) {
    const { rows } = await db.query(
      "select count(*)::int as n from pg_stat_activity where pid = $1 and application_name = $2 and state = 'active'",
      [pid, `sluice:${queryId}`],
    );
    if (rows[0].n === 0) {
      latency = performance.now() - t0;
      break;
    }
    await sleep(POLL_MS);
  }
  if (!Number.isFinite(latency)) {
    await db.query('select pg_cancel_backend($1)', [pid]);
  }
  const del = await deleteAnswer;
  const answer =
    mode === 'DELETE'
      ? await Promise.race([response, sleep(5000, { status: 0, body: 'no answer in 5 s' })])
      : undefined;
  req.destroy();
  const info = await request(new URL(`/v1/queries/${queryId}`, sluice.baseUrl), {
    headers: sluice.headers,
  });
  const state = info.status === 200 ? JSON.parse(info.body).state : `HTTP ${info.status}`;
  return { queryId, latency, deleteMs: del?.ms, deleteStatus: del?.status, answer, state };
}

async function series(sluice, db, mode) {
  const results = [];
  process.stdout.write(`${mode}: `);
  for (let i = 1; i <= N; i++) {
    const r = await unlessDied(sluice, once(sluice, db, mode, i));
    results.push(r);
    process.stdout.write(Number.isFinite(r.latency) ? `${r.latency.toFixed(0)} ` : 'FAIL ');
    await sleep(100);
  }
  console.log('ms');
  return results;
}

function summarize(label, results) {
  const lat = results
    .map((r) => r.latency)
    .filter(Number.isFinite)
    .sort((a, b) => a - b);
  const failed = results.length - lat.length;
  const p99 = failed > 0 ? Infinity : percentile(lat, 99);
  const states = {};
  for (const r of results) states[r.state] = (states[r.state] ?? 0) + 1;
  return {
    label,
    n: results.length,
    failed,
    p50: percentile(lat, 50),
    p90: percentile(lat, 90),
    p99,
    max: failed > 0 ? Infinity : lat.at(-1),
    min: lat[0],
    states,
  };
}

async function main() {
  const loadAtStart = loadAverage();
  const warning = staleBuildWarning();
  if (warning) console.error(warning);
  const sluice = await startSluice();
  const db = new pg.Client({ connectionString: DATABASE_URL, application_name: 'bench-cancel' });
  await db.connect();
  onCleanup(async () => {
    // Nothing of ours may keep sleeping.
    await db
      .query(
        "select pg_cancel_backend(pid) from pg_stat_activity where query like 'select pg_sleep(30) as bench_cancel_' || $1 || '%'",
        [tag],
      )
      .catch(() => undefined);
    await db.end();
  });

  let disconnect;
  let deleted;
  try {
    disconnect = await series(sluice, db, 'disconnect');
    deleted = await series(sluice, db, 'DELETE');
  } catch (err) {
    printChildOutput(sluice);
    throw err;
  }
  const a = summarize('client disconnects', disconnect);
  const b = summarize('DELETE /v1/queries/{id}', deleted);
  const delMs = deleted
    .map((r) => r.deleteMs)
    .filter(Number.isFinite)
    .sort((x, y) => x - y);
  const delStatuses = [...new Set(deleted.map((r) => r.deleteStatus))].join(', ');
  const answers = {};
  for (const r of deleted) {
    let key = `HTTP ${r.answer?.status}`;
    try {
      const parsed = JSON.parse(r.answer?.body);
      const status = parsed.status ?? parsed;
      if (status?.vendor_code !== undefined) key += ` vendor_code ${status.vendor_code}`;
    } catch {
      // not JSON
    }
    answers[key] = (answers[key] ?? 0) + 1;
  }
  const fmt = (v) => (v === Infinity ? '> timeout' : ms(v));
  const row = (s) =>
    `| ${s.label} | ${s.n} | ${s.failed} | ${fmt(s.min)} | ${fmt(s.p50)} | ${fmt(s.p90)} | ${fmt(s.p99)} | ${fmt(s.max)} | ${Object.entries(
      s.states,
    )
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')} |`;
  const out = [
    ...reportHeader(`Cancel latency, ${N} cancels each way`, loadAtStart),
    '- Statement: `select pg_sleep(30) as <marker>`; its backend found in pg_stat_activity by application_name `sluice:<query id>` (query id from GET /v1/queries), then cancelled 50 ms later',
    `- Latency: from the cancel (socket destroyed, or DELETE sent) until pg_stat_activity no longer shows that backend active for the query, polled every ${POLL_MS} ms on a separate connection (each poll takes ~0.5 ms); a cancel not seen within ${CANCEL_TIMEOUT_MS} ms counts as failed`,
    `- With N = ${N} (< 100), p99 is the largest value: it equals the max`,
    '',
    '| cancel by | n | failed | min ms | p50 ms | p90 ms | p99 ms | max ms | final state |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---|',
    row(a),
    row(b),
    '',
    `- DELETE answered in p50 ${ms(percentile(delMs, 50))} ms, max ${ms(delMs.at(-1))} ms (HTTP ${delStatuses}); the cancelled request got ${Object.entries(
      answers,
    )
      .map(([k, v]) => `${k} ×${v}`)
      .join(', ')}`,
    '',
    'Goals:',
    '',
    `- on disconnect, p99 < ${GOAL_P99_MS} ms: **${fmt(a.p99)} ms** — ${met(a.p99 < GOAL_P99_MS)}`,
    `- on DELETE, p99 < ${GOAL_P99_MS} ms: **${fmt(b.p99)} ms** — ${met(b.p99 < GOAL_P99_MS)}`,
  ];
  console.log(`\n${out.join('\n')}\n`);
}

await runMain(main);
