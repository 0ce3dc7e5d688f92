// What the api's checks of a POST /v1/execute body cost per request, in process (no service, no
// database), each next to its floor, from dist/:
//   - the global validation pipe (Nest's ValidationPipe: class-transformer, then class-validator)
//     on the parsed body, against JSON.parse alone;
//   - the scan of the JSON text before parsing (json-text.check.ts) with JSON.parse, against
//     JSON.parse alone;
//   - the body stream through BodyCheck (UTF-8, receiving budget), against the bare stream.
// CPU µs per request (process.cpuUsage), after a warm-up, median of BENCH_RUNS runs. About 20 s.
//
//   npm run build && node bench/request-pipeline.mjs
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { ROOT, envInt, hardTimeLimit, requireDist } from './lib/env.mjs';

const require = createRequire(path.join(ROOT, 'package.json'));
require('reflect-metadata');
const { StrictValidationPipe } = requireDist('apps/api/src/http/strict-validation.pipe.js');
const { jsonTextError } = requireDist('apps/api/src/http/json-text.check.js');
const { BodyCheck, ReceivingBudget } = requireDist('apps/api/src/http/request.checks.js');
const { ExecuteRequestDto } = requireDist('libs/http-contracts/src/index.js');

const RUNS = envInt('BENCH_RUNS', 5);
const N = envInt('BENCH_ITERATIONS', 20_000);
hardTimeLimit((RUNS * 10 + 30) * 1000);

// The body of small-queries.mjs.
const text = '{"statement":"select g, md5(g::text) from generate_series(1,10) g"}';
const bytes = Buffer.from(text);
const pipe = new StrictValidationPipe();
const meta = { type: 'body', metatype: ExecuteRequestDto, data: undefined };
const budget = new ReceivingBudget(1 << 30);

async function stream(check) {
  const source = new PassThrough();
  const out = check ? source.pipe(new BodyCheck(budget)) : source;
  source.end(bytes);
  for await (const chunk of out) void chunk;
}

const cases = {
  'JSON.parse (floor)': () => JSON.parse(text),
  'JSON.parse + validation pipe': () => pipe.transform(JSON.parse(text), meta),
  'text scan + JSON.parse': () => jsonTextError(text, 64) ?? JSON.parse(text),
  'body stream (floor)': () => stream(false),
  'body stream through BodyCheck': () => stream(true),
};

/** CPU µs per call of `fn`, over N calls (awaited when it returns a promise). */
async function measure(fn) {
  const start = process.cpuUsage();
  for (let i = 0; i < N; i++) await fn();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / N;
}

const results = Object.fromEntries(Object.keys(cases).map((name) => [name, []]));
for (const fn of Object.values(cases)) await measure(fn); // warm-up
for (let run = 0; run < RUNS; run++) {
  for (const [name, fn] of Object.entries(cases)) results[name].push(await measure(fn));
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
const load = loadavg().map((l) => l.toFixed(2)).join(', ');
console.log(`\n### request-pipeline.mjs — ${new Date().toISOString()}, commit ${commit}, load ${load}\n`);
console.log(`| step | CPU µs/request (median of ${RUNS} × ${N}) |`);
console.log('|---|---:|');
for (const [name, xs] of Object.entries(results)) {
  console.log(`| ${name} | ${median(xs).toFixed(1)} |`);
}
