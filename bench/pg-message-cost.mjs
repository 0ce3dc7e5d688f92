// PostgreSQL's own CPU for one small query, by the message sequence a client sends for it: the
// skeleton's one simple query against the worker's (a prelude of BEGIN and SET LOCALs pipelined
// with the extended-protocol statement, then the portal's Close and Sync with the COMMIT and the
// session's reset), and variants of the latter ("reset less X": the nine-statement reset without
// X, to price each statement; none of these is safe to use). BENCH_SEQUENCES=a|b runs only those. One raw connection (pg-protocol's serializer, no
// pg Client), one sequence at a time, run back to back; the backend's CPU time is read from
// /proc/<pid>/schedstat (ns on the CPU), so the figure is the backend's alone, not the wait.
//
//   node bench/pg-message-cost.mjs            BENCH_ITERATIONS=5000 BENCH_ROUNDS=3
//
// Needs PostgreSQL on this machine (its backend's /proc entry is read), a superuser login.
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { parse, serialize } from 'pg-protocol';
import {
  DATABASE_URL,
  envInt,
  installGuards,
  runMain,
  staleBuildWarning,
  SMALL_STATEMENT,
} from './lib/service.mjs';

const ITERATIONS = envInt('BENCH_ITERATIONS', 5000);
const ROUNDS = envInt('BENCH_ROUNDS', 3);
const CHUNK = 250;
const ONLY = process.env.BENCH_SEQUENCES?.split('|');
const STATEMENT = SMALL_STATEMENT;
const ROLE = 'sluice_bench_cost_role';
// A tag of the length the worker sets (ApplicationNames: a prefix and 16 bytes base64url).
const APP_NAME = 'sluice:q:AAAAAAAAAAAAAAAAAAAAAA';

const RESET_NOW = [
  'CLOSE ALL',
  'SET SESSION AUTHORIZATION DEFAULT',
  'RESET ALL',
  'DEALLOCATE ALL',
  'UNLISTEN *',
  'SELECT pg_advisory_unlock_all()',
  'DISCARD PLANS',
  'DISCARD TEMP',
  'DISCARD SEQUENCES',
].join('; ');

const extended = (sql) =>
  Buffer.concat([serialize.parse({ text: sql }), serialize.bind({}), serialize.execute({})]);

/** The worker's first write: the prelude's statements, then the cursor's, with a Flush. */
function firstWrite(prelude) {
  return Buffer.concat([
    ...prelude.map(extended),
    serialize.parse({ text: STATEMENT, types: [] }),
    serialize.bind({ portal: 'C_1', values: [] }),
    serialize.describe({ type: 'P', name: 'C_1' }),
    serialize.execute({ portal: 'C_1', rows: 1000 }),
    serialize.flush(),
  ]);
}

/** The worker's second write: the portal's Close and Sync, then `end` as one simple query. */
const secondWrite = (end) =>
  Buffer.concat([
    serialize.close({ type: 'P', name: 'C_1' }),
    serialize.sync(),
    serialize.query(end),
  ]);

const PRELUDE = ['BEGIN', `SET LOCAL ROLE ${ROLE}`, `SET LOCAL application_name = '${APP_NAME}'`];
const twoTrips = (prelude, end) => [
  { write: firstWrite(prelude), until: ['C', prelude.length + 1] },
  { write: secondWrite(end), until: ['Z', 2] },
];

/** Each sequence: writes, each awaited until the n-th message of a type. */
const SEQUENCES = {
  skeleton: [
    {
      write: serialize.query(`BEGIN; SET LOCAL ROLE ${ROLE}; ${STATEMENT}; COMMIT`),
      until: ['Z', 1],
    },
  ],
  'worker, the reset as nine statements after COMMIT (until 2026-12-05)': twoTrips(
    PRELUDE,
    `COMMIT; ${RESET_NOW}`,
  ),
  'worker, COMMIT alone': twoTrips(PRELUDE, 'COMMIT'),
  'worker (COMMIT, then DISCARD ALL as a query of its own)': [
    { write: firstWrite(PRELUDE), until: ['C', PRELUDE.length + 1] },
    {
      write: Buffer.concat([secondWrite('COMMIT'), serialize.query('DISCARD ALL')]),
      until: ['Z', 3],
    },
  ],
  'worker, COMMIT alone, no application_name': twoTrips(PRELUDE.slice(0, 2), 'COMMIT'),
  'worker, COMMIT alone, in one write (a bound, not a choice)': [
    { write: Buffer.concat([firstWrite(PRELUDE), secondWrite('COMMIT')]), until: ['Z', 2] },
  ],
  'worker, no application_name': twoTrips(PRELUDE.slice(0, 2), `COMMIT; ${RESET_NOW}`),
  'worker, reset less DISCARD PLANS': twoTrips(
    PRELUDE,
    `COMMIT; ${RESET_NOW.replace('DISCARD PLANS; ', '')}`,
  ),
  'worker, reset less the SELECT': twoTrips(
    PRELUDE,
    `COMMIT; ${RESET_NOW.replace('SELECT pg_advisory_unlock_all(); ', '')}`,
  ),
  'worker, reset less RESET ALL': twoTrips(
    PRELUDE,
    `COMMIT; ${RESET_NOW.replace('RESET ALL; ', '')}`,
  ),
  'worker, reset less SET SESSION AUTHORIZATION': twoTrips(
    PRELUDE,
    `COMMIT; ${RESET_NOW.replace('SET SESSION AUTHORIZATION DEFAULT; ', '')}`,
  ),
  // A simple Query ends in ReadyForQuery, which PostgreSQL flushes with a write of its own: the
  // SET LOCALs as one string cost more than their Parse/Bind/Execute each in the batch.
  'worker, BEGIN as Parse/Bind/Execute, the SET LOCALs as one simple query': [
    {
      write: Buffer.concat([
        extended(PRELUDE[0]),
        serialize.query(PRELUDE.slice(1).join('; ')),
        firstWrite([]),
      ]),
      until: ['C', 4],
    },
    {
      write: Buffer.concat([secondWrite('COMMIT'), serialize.query('DISCARD ALL')]),
      until: ['Z', 3],
    },
  ],
  'worker, prelude as one simple query': [
    {
      write: Buffer.concat([serialize.query(PRELUDE.join('; ')), firstWrite([]).subarray(0)]),
      until: ['C', 4],
    },
    { write: secondWrite(`COMMIT; ${RESET_NOW}`), until: ['Z', 2] },
  ],
};

/** The backend's time on the CPU so far (ns). */
const cpuNs = (pid) => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);

async function connect() {
  const url = new URL(DATABASE_URL);
  const socket = net.connect({ host: url.hostname, port: Number(url.port || 5432) });
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.setNoDelay(true);
  let waiting;
  const counts = new Map();
  const rows = [];
  let last;
  void parse(socket, (msg) => {
    const code = { readyForQuery: 'Z', commandComplete: 'C', error: 'E' }[msg.name];
    if (msg.name === 'error') console.error('error:', msg.message);
    if (msg.name === 'dataRow') {
      last = msg;
      if (msg.fieldCount === 2) rows.push(msg);
    }
    if (!code) return;
    counts.set(code, (counts.get(code) ?? 0) + 1);
    if (waiting && counts.get(waiting.code) === waiting.n) {
      const w = waiting;
      waiting = undefined;
      w.resolve();
    }
  });
  const until = (code, n) => {
    counts.clear();
    return new Promise((resolve) => (waiting = { code, n, resolve }));
  };
  socket.write(
    serialize.startup({
      user: decodeURIComponent(url.username) || 'postgres',
      database: url.pathname.slice(1) || 'postgres',
    }),
  );
  await until('Z', 1);
  /** Sends `steps` and awaits each one's answer. */
  const run = async (steps) => {
    for (const step of steps) {
      const answered = until(...step.until);
      socket.write(step.write);
      await answered;
    }
  };
  await run([{ write: serialize.query('select pg_backend_pid()'), until: ['Z', 1] }]);
  const pid = Number(last.fields[0]);
  rows.length = 0;
  return { run, pid, close: () => socket.destroy(), rows };
}

await runMain(async () => {
  installGuards(10 * 60_000);
  staleBuildWarning();
  const conn = await connect();
  await conn.run([
    {
      write: serialize.query(
        `DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${ROLE}') THEN CREATE ROLE ${ROLE} NOLOGIN; END IF; END $$`,
      ),
      until: ['Z', 1],
    },
  ]);
  const names = Object.keys(SEQUENCES).filter((name) => !ONLY || ONLY.includes(name));
  const results = new Map(names.map((name) => [name, []]));
  for (const name of names) for (let i = 0; i < 200; i++) await conn.run(SEQUENCES[name]);
  conn.rows.length = 0;
  // Sequences alternate every CHUNK iterations: the machine's drift falls on all alike.
  for (let round = 0; round < ROUNDS; round++) {
    const sums = new Map(names.map((name) => [name, { cpu: 0, wall: 0 }]));
    for (let done = 0; done < ITERATIONS; done += CHUNK) {
      for (const name of names) {
        const steps = SEQUENCES[name];
        const before = cpuNs(conn.pid);
        const started = process.hrtime.bigint();
        for (let i = 0; i < CHUNK; i++) await conn.run(steps);
        const sum = sums.get(name);
        sum.wall += Number(process.hrtime.bigint() - started);
        sum.cpu += cpuNs(conn.pid) - before;
        if (conn.rows.length !== 10 * CHUNK) throw new Error(`${name}: ${conn.rows.length} rows`);
        conn.rows.length = 0;
      }
    }
    for (const [name, sum] of sums) {
      results
        .get(name)
        .push({ cpu: sum.cpu / ITERATIONS / 1e3, wall: sum.wall / ITERATIONS / 1e3 });
    }
  }
  console.log(
    `\n${ITERATIONS} iterations × ${ROUNDS} rounds, load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
  );
  console.log('| sequence | backend CPU µs per query (rounds) | wall µs |');
  console.log('|---|---|---:|');
  for (const [name, runs] of results) {
    const cpus = runs.map((r) => r.cpu.toFixed(1)).join(' / ');
    const wall = Math.min(...runs.map((r) => r.wall)).toFixed(1);
    console.log(`| ${name} | ${cpus} | ${wall} |`);
  }
  await conn.run([{ write: serialize.query(`DROP ROLE IF EXISTS ${ROLE}`), until: ['Z', 1] }]);
  conn.close();
});
