// Fairness (issue 5): one user floods the queue, another submits one query a second. User A keeps as
// many `select pg_sleep(0.5)` queued or running as the per-user cap allows (a 429 is retried at
// once), which fills A's share of the worker's slots (SLUICE_WORKER_USER_SHARE_PERCENT) and leaves
// A's surplus waiting; user B submits a short query every second. B's queue wait (started_at −
// created_at from GET /v1/queries/{id}) is compared with one of A's jobs (0.5 s, at most 500 ms).
// Run by hand:
//
//   npm run build && node bench/fairness.mjs
//   BENCH_JOB_MS=10000 node bench/fairness.mjs                 # A's statements run 10 s each
//   BENCH_JOB_MS=10000 BENCH_USER_SHARE_PERCENT=100 node …     # A may take every slot
//
// The two users are made for the run (rows in sluice.users with scrypt hashes, role = the bench's own
// NOLOGIN role) and deleted at the end. Bounded in time; everything it starts is removed at the end,
// also on error and on Ctrl-C.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import {
  DATABASE_URL,
  benchAdminRole,
  envInt,
  installGuards,
  jsonRequest,
  loadAverage,
  login,
  met,
  ms,
  onCleanup,
  percentile,
  printChildOutput,
  reportHeader,
  request,
  requireDist,
  runMain,
  staleBuildWarning,
  startSluice,
  unlessDied,
} from './lib/service.mjs';

const SECONDS = envInt('BENCH_SECONDS', 20);
const CAP = envInt('BENCH_USER_CAP', 16); // SLUICE_MAX_ACTIVE_PER_USER for the run
// A has more clients than its cap, so that it always has a request knocking (answered 429).
const A_CLIENTS = envInt('BENCH_A_CLIENTS', CAP + 4);
const JOB_SECONDS = envInt('BENCH_JOB_MS', 500) / 1000;
// SLUICE_WORKER_USER_SHARE_PERCENT for the run (the service's default, 50, when unset).
const SHARE = process.env.BENCH_USER_SHARE_PERCENT;
const A_STATEMENT = `select pg_sleep(${JOB_SECONDS})`;
const B_STATEMENT = 'select 1 as b';
const GOAL_WAIT_MS = Math.min(JOB_SECONDS * 1000, 500);
// One worker of 2 threads × 4 tasks: the slots one user's queries may hold at once.
const A_SLOTS = Math.max(1, Math.ceil((8 * Number(SHARE ?? 50)) / 100));

installGuards((SECONDS + JOB_SECONDS + 120) * 1000);

async function createUsers(db) {
  const { hashPassword } = requireDist('libs/users/src/password.hasher.js');
  // Not the login of DATABASE_URL (it may create roles, so Sluice refuses it to users): the
  // bench's own NOLOGIN role.
  const role = await benchAdminRole(DATABASE_URL);
  const suffix = randomBytes(4).toString('hex');
  const users = ['a', 'b'].map((x) => ({
    username: `bench_${x}_${suffix}`,
    password: randomBytes(12).toString('base64url'),
  }));
  onCleanup(async () => {
    const r = await db.query('delete from sluice.users where username = any($1)', [
      users.map((u) => u.username),
    ]);
    console.error(`cleanup: deleted ${r.rowCount} bench users`);
  });
  for (const u of users) {
    await db.query('insert into sluice.users (username, password_hash, role) values ($1, $2, $3)', [
      u.username,
      await hashPassword(u.password),
      role,
    ]);
  }
  return { users, role };
}

/** ISO timestamps of GET /v1/queries/{id} → queue wait in ms. */
async function queueWait(baseUrl, headers, queryId) {
  const res = await request(new URL(`/v1/queries/${queryId}`, baseUrl), { headers });
  if (res.status !== 200) return { error: `GET /v1/queries: HTTP ${res.status}` };
  const q = JSON.parse(res.body);
  if (!q.started_at) return { error: `not started (${q.state})`, q };
  return { wait: Date.parse(q.started_at) - Date.parse(q.created_at), q };
}

/** User A: A_CLIENTS loops, each submitting A_STATEMENT again as soon as its last one ended. */
function flood(baseUrl, headers, agent, stopAt) {
  const stats = { ok: 0, rejected: 0, failed: 0, ids: [] };
  const url = new URL('/v1/execute', baseUrl);
  const loop = async () => {
    while (performance.now() < stopAt) {
      const res = await jsonRequest(url, { statement: A_STATEMENT }, headers, agent, 60_000);
      if (res.status === 200) {
        stats.ok++;
        stats.ids.push(JSON.parse(res.body).query_id);
      } else if (res.status === 429) {
        stats.rejected++;
        await sleep(5);
      } else {
        stats.failed++;
        if (!stats.firstFailure)
          stats.firstFailure = `HTTP ${res.status} ${res.body.slice(0, 200)}`;
        await sleep(100);
      }
    }
  };
  return { stats, done: Promise.all(Array.from({ length: A_CLIENTS }, loop)) };
}

/** One query of B: client-side latency and the queue wait the registry saw. */
async function bOnce(baseUrl, headers) {
  const start = performance.now();
  const res = await jsonRequest(
    new URL('/v1/execute', baseUrl),
    { statement: B_STATEMENT },
    headers,
  );
  const latency = performance.now() - start;
  if (res.status !== 200) return { error: `HTTP ${res.status} ${res.body.slice(0, 200)}`, latency };
  const queryId = JSON.parse(res.body).query_id;
  const w = await queueWait(baseUrl, headers, queryId);
  return { queryId, latency, wait: w.wait, error: w.error };
}

async function aQueued(baseUrl, headers) {
  const res = await request(new URL('/v1/queries', baseUrl), { headers });
  if (res.status !== 200) return undefined;
  const list = JSON.parse(res.body);
  return {
    queued: list.filter((q) => q.state === 'queued').length,
    running: list.filter((q) => q.state === 'running' || q.state === 'streaming').length,
  };
}

async function main() {
  const loadAtStart = loadAverage();
  const warning = staleBuildWarning();
  if (warning) console.error(warning);
  const env = { SLUICE_MAX_ACTIVE_PER_USER: String(CAP) };
  if (SHARE !== undefined) env.SLUICE_WORKER_USER_SHARE_PERCENT = SHARE;
  const sluice = await startSluice({ env });
  const db = new pg.Client({ connectionString: DATABASE_URL });
  await db.connect();
  onCleanup(() => db.end());
  const { users, role } = await createUsers(db);
  const [a, b] = users;
  const aHeaders = await login(sluice.baseUrl, a.username, a.password);
  const bHeaders = await login(sluice.baseUrl, b.username, b.password);

  // B alone first: the wait with an idle queue.
  const alone = [];
  for (let i = 0; i < 5; i++) {
    alone.push(await unlessDied(sluice, bOnce(sluice.baseUrl, bHeaders)));
    await sleep(200);
  }

  // A floods; B submits one query a second, from the second second on.
  console.log(
    `flood: user A keeps ${CAP} × \`${A_STATEMENT}\` in flight for ${SECONDS} s; user B: \`${B_STATEMENT}\` every second`,
  );
  const agent = new http.Agent({ keepAlive: true, maxSockets: A_CLIENTS });
  const floodStart = performance.now();
  const stopAt = floodStart + SECONDS * 1000;
  const a1 = flood(sluice.baseUrl, aHeaders, agent, stopAt);
  await sleep(1500);
  const during = [];
  while (performance.now() < stopAt - 1000) {
    const tick = performance.now();
    const backlog = await aQueued(sluice.baseUrl, aHeaders);
    const r = await unlessDied(sluice, bOnce(sluice.baseUrl, bHeaders));
    r.backlog = backlog;
    during.push(r);
    process.stdout.write(Number.isFinite(r.wait) ? `${r.wait} ` : 'x ');
    await sleep(Math.max(0, 1000 - (performance.now() - tick)));
  }
  console.log('ms');
  await unlessDied(sluice, a1.done);
  agent.destroy();
  const floodSeconds = (performance.now() - floodStart) / 1000;

  // A's own waits, from the registry (newest 500 of A's queries).
  const list = await request(new URL('/v1/queries', sluice.baseUrl), { headers: aHeaders });
  const aWaits = (list.status === 200 ? JSON.parse(list.body) : [])
    .filter((q) => q.started_at)
    .map((q) => Date.parse(q.started_at) - Date.parse(q.created_at))
    .sort((x, y) => x - y);

  const bErrors = during.filter((r) => r.error);
  if (bErrors.length > 0 || a1.stats.failed > 0) printChildOutput(sluice);
  const waits = during
    .map((r) => r.wait)
    .filter(Number.isFinite)
    .sort((x, y) => x - y);
  const lats = during
    .map((r) => r.latency)
    .filter(Number.isFinite)
    .sort((x, y) => x - y);
  const aloneWaits = alone
    .map((r) => r.wait)
    .filter(Number.isFinite)
    .sort((x, y) => x - y);
  const backlogs = during.map((r) => r.backlog?.queued).filter(Number.isFinite);
  const maxWait = waits.at(-1);

  const out = [
    ...reportHeader('Fairness, one user flooding', loadAtStart),
    `- Sluice defaults but SLUICE_MAX_ACTIVE_PER_USER=${CAP}${SHARE === undefined ? '' : ` and SLUICE_WORKER_USER_SHARE_PERCENT=${SHARE}`}: one worker process, 2 threads × 4 tasks = 8 queries at a time, ${A_SLOTS} of one user's; users are plain (non-admin) rows in sluice.users with role \`${role}\``,
    `- User A: ${A_CLIENTS} keep-alive clients (cap ${CAP}), each re-submitting \`${A_STATEMENT}\` as soon as its previous one ends (a 429 is retried after 5 ms), for ${SECONDS} s: ${a1.stats.ok} done (${(a1.stats.ok / floodSeconds).toFixed(1)}/s, at most ${(A_SLOTS / JOB_SECONDS).toFixed(1)}/s with its share of the slots), ${a1.stats.rejected} answered 429, ${a1.stats.failed} failed${a1.stats.firstFailure ? ` (${a1.stats.firstFailure})` : ''}`,
    `- User B: \`${B_STATEMENT}\` once a second during the flood: ${during.length} queries, ${bErrors.length} errors${bErrors.length ? ` (${bErrors[0].error})` : ''}; A had ${backlogs.length ? `${Math.min(...backlogs)}–${Math.max(...backlogs)}` : '?'} queries queued at those moments`,
    `- Queue wait = started_at − created_at of GET /v1/queries/{id} (millisecond timestamps of the api and the worker, same machine)`,
    '',
    '| who | n | wait p50 ms | p90 ms | max ms | client latency p50 ms | max ms |',
    '|---|---:|---:|---:|---:|---:|---:|',
    `| B, queue idle | ${aloneWaits.length} | ${ms(percentile(aloneWaits, 50))} | ${ms(percentile(aloneWaits, 90))} | ${ms(aloneWaits.at(-1))} | ${ms(
      percentile(
        alone.map((r) => r.latency).sort((x, y) => x - y),
        50,
      ),
    )} | ${ms(Math.max(...alone.map((r) => r.latency)))} |`,
    `| B, during A's flood | ${waits.length} | ${ms(percentile(waits, 50))} | ${ms(percentile(waits, 90))} | ${ms(maxWait)} | ${ms(percentile(lats, 50))} | ${ms(lats.at(-1))} |`,
    `| A, during its flood | ${aWaits.length} | ${ms(percentile(aWaits, 50))} | ${ms(percentile(aWaits, 90))} | ${ms(aWaits.at(-1))} | | |`,
    '',
    'Goal:',
    '',
    `- B's query starts within one of A's jobs' time, at most 500 ms (${GOAL_WAIT_MS} ms) while A floods: max wait **${ms(maxWait)} ms**, p90 ${ms(percentile(waits, 90))} ms — ${met(waits.length > 0 && bErrors.length === 0 && maxWait <= GOAL_WAIT_MS)}`,
  ];
  console.log(`\n${out.join('\n')}\n`);
}

await runMain(main);
