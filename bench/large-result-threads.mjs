// Where the time of one large stream+json result goes, thread by thread: for each request, every
// thread of the worker and of the api that ran at least 20 ms, with its time on a CPU and its time
// waiting for one (runnable, not running: /proc/<pid>/task/<tid>/schedstat), and the Redis
// commands the request cost (INFO commandstats). Two clients alternate on the stored table of
// large-result.mjs: one counting bytes, one JSON.parse-ing every line (as large-result.mjs's two
// stream+json paths). On two cores the pool thread that encodes the result is the critical path;
// its waiting time says how much of the request it spent runnable while the other processes had
// both cores.
//
//   npm run build && node bench/large-result-threads.mjs
//
// BENCH_ROUNDS (3): pairs of requests; BENCH_KEEP_TABLE=1 keeps the table for a later run.
// With BENCH_CHILD_NODE_ARGS=--trace-gc and
// BENCH_CHILD_OUTPUT_DIR=<dir>, the worker's collections are in <dir>/worker-<pid>.log.
import fs from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { setTimeout as sleep } from 'node:timers/promises';
import { createStoredTable, storedTableName } from './lib/exports.mjs';
import {
  envInt,
  executeRequest,
  installGuards,
  runMain,
  serverCounts,
  startSluice,
  storedTable,
} from './lib/service.mjs';

const ROUNDS = envInt('BENCH_ROUNDS', 3);
const ROWS = 1_000_000;
const TABLE = storedTableName(ROWS);
/** As large-result.mjs: the table is made if missing, and dropped at the end unless kept. */
const KEEP_TABLE = process.env.BENCH_KEEP_TABLE === '1';

// The table's set-up, the service's start, then up to a minute a round.
installGuards((120 + 60 * ROUNDS) * 1000);

/** Each thread's on-CPU and runnable-waiting seconds, and its name, by thread id. */
function threads(pid) {
  const out = new Map();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const [run, wait] = fs
        .readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8')
        .split(' ')
        .map(Number);
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      out.set(tid, { name, run: run / 1e9, wait: wait / 1e9 });
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return out;
}

function threadLines(before, after) {
  const lines = [];
  for (const [tid, t] of after) {
    const b = before.get(tid);
    if (!b || t.run - b.run < 0.02) continue;
    lines.push(
      `    - ${tid} (${t.name}): on a CPU ${(t.run - b.run).toFixed(2)} s, waiting for one ${(t.wait - b.wait).toFixed(2)} s`,
    );
  }
  return lines;
}

/** The reader of large-result.mjs's parsing client: lines split, each JSON.parse'd. */
function parsingReader() {
  const decoder = new StringDecoder('utf8');
  let partial = '';
  return (c) => {
    const text = partial + decoder.write(c);
    if (c.indexOf(10) === -1) {
      partial = text;
      return;
    }
    const lines = text.split('\n');
    partial = lines.pop();
    for (const line of lines) JSON.parse(line);
  };
}

function read(sluice, body, parse) {
  return new Promise((resolve, reject) => {
    const req = executeRequest(sluice, body, 'application/stream+json', (res) => {
      const add = parse ? parsingReader() : () => undefined;
      res.on('data', add);
      res.on('end', resolve);
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function main() {
  await storedTable(TABLE, createStoredTable(TABLE, ROWS), { keep: KEEP_TABLE });
  const sluice = await startSluice();
  const body = Buffer.from(JSON.stringify({ statement: `select * from ${TABLE}` }));
  const out = [
    `### large-result-threads.mjs — ${new Date().toISOString()}, ${ROUNDS} rounds, \`select * from ${TABLE}\` as stream+json`,
    '',
  ];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const parse of [false, true]) {
      const worker = threads(sluice.worker.pid);
      const api = threads(sluice.api.pid);
      const commands = (await serverCounts()).commands;
      const started = performance.now();
      await read(sluice, body, parse);
      const seconds = (performance.now() - started) / 1000;
      const after = (await serverCounts()).commands;
      const redis = Object.entries(after)
        .map(([name, calls]) => [name, calls - (commands[name] ?? 0)])
        .filter(([, calls]) => calls >= 20)
        .map(([name, calls]) => `${name} ${calls}`)
        .join(', ');
      out.push(
        `- round ${round}, the client ${parse ? 'parsing every line' : 'counting bytes'}: ${seconds.toFixed(2)} s`,
        '  - worker:',
        ...threadLines(worker, threads(sluice.worker.pid)),
        '  - api:',
        ...threadLines(api, threads(sluice.api.pid)),
        `  - Redis commands: ${redis}`,
      );
      await sleep(1500);
    }
  }
  console.log(`\n${out.join('\n')}\n`);
}

await runMain(main);
