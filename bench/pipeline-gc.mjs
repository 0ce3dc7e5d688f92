// What an ioredis pipeline costs the garbage collector, with the `length` accessor as
// patches/ioredis+5.11.1.patch defines it (once, on the prototype) and as ioredis itself does (on
// each pipeline, with a closure of its own). Each variant runs in a child process under
// `--trace-gc-nvp`: four loops send a two-command pipeline and wait for it, for BENCH_SECONDS;
// the report gives the rounds and, from V8's own trace, what each scavenge promoted and how long
// it paused. Run by hand:
//
//   node bench/pipeline-gc.mjs
//
// Needs Redis on loopback. Bounded in time; its keys are removed at the end, also on error.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import Redis from 'ioredis';
import {
  REDIS_URL,
  deleteRedisKeys,
  envInt,
  installGuards,
  onCleanup,
  runMain,
} from './lib/service.mjs';

const SECONDS = envInt('BENCH_SECONDS', 5);
const LOOPS = envInt('BENCH_CONCURRENCY', 4);

/** Child: the loops, for SECONDS; prints the rounds made. */
async function child(prefix, ownAccessor) {
  const redis = new Redis(REDIS_URL);
  const until = Date.now() + SECONDS * 1000;
  let rounds = 0;
  const loop = async (i) => {
    while (Date.now() < until) {
      const pipeline = redis.pipeline();
      // As unpatched ioredis does in its constructor.
      if (ownAccessor)
        Object.defineProperty(pipeline, 'length', { get: () => pipeline._queue.length });
      await pipeline.set(`${prefix}:${i}`, 'x').get(`${prefix}:${i}`).exec();
      rounds++;
    }
  };
  await Promise.all(Array.from({ length: LOOPS }, (_, i) => loop(i)));
  await redis.quit();
  process.stderr.write(`ROUNDS ${rounds}\n`);
}

/** Runs one variant; returns its rounds and V8's scavenge figures over the second half. */
function run(prefix, ownAccessor) {
  const script = fileURLToPath(import.meta.url);
  const proc = spawn(
    process.execPath,
    ['--trace-gc-nvp', script, 'child', prefix, ownAccessor ? '1' : '0'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  onCleanup(() => proc.kill());
  let out = '';
  let err = '';
  proc.stdout.on('data', (d) => (out += d));
  proc.stderr.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    proc.once('exit', (code) => {
      const rounds = Number(/ROUNDS (\d+)/.exec(err)?.[1]);
      if (code !== 0 || !rounds) return reject(new Error(`child failed (${code}): ${err}`));
      const scavenges = out.split('\n').filter((l) => / gc=s /.test(l));
      const field = (line, name) => Number(new RegExp(`(?:^| )${name}=([0-9.]+)`).exec(line)?.[1]);
      const tail = scavenges.slice(Math.floor(scavenges.length / 2));
      const mean = (name) => tail.reduce((sum, l) => sum + field(l, name), 0) / tail.length;
      resolve({
        rounds,
        scavenges: scavenges.length,
        promotedKb: mean('promoted') / 1024,
        pauseMs: mean('pause'),
      });
    });
  });
}

async function main() {
  const prefix = `bench-pipeline-${randomBytes(4).toString('hex')}`;
  onCleanup(() => deleteRedisKeys(prefix));
  const rows = [];
  for (const [name, own] of [
    ['`length` on the prototype (patched)', false],
    ['`length` on each pipeline (ioredis as published)', true],
  ]) {
    rows.push([name, await run(prefix, own)]);
  }
  console.log(`\n### ioredis pipelines and the GC — ${new Date().toISOString()}\n`);
  console.log(
    `${LOOPS} loops, a SET and a GET in a pipeline each round, ${SECONDS} s per variant; scavenges over the second half\n`,
  );
  console.log('| pipeline | rounds/s | scavenges | promoted per scavenge | mean scavenge pause |');
  console.log('|---|---:|---:|---:|---:|');
  for (const [name, r] of rows) {
    console.log(
      `| ${name} | ${Math.round(r.rounds / SECONDS)} | ${r.scavenges} | ${r.promotedKb.toFixed(0)} KB | ${r.pauseMs.toFixed(2)} ms |`,
    );
  }
}

if (process.argv[2] === 'child') {
  await child(process.argv[3], process.argv[4] === '1');
} else {
  installGuards((SECONDS * 2 + 60) * 1000);
  await runMain(main);
}
