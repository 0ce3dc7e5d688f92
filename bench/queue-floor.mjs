// The queue's own floor for small queries: a bare BullMQ round trip with Sluice's job options
// (attempts 1, a priority, removal by age) — add, a worker in another process takes the job and
// answers through a Redis list, the producer waits for the answer — with no SQL, no HTTP and no
// result stream. Shows how much of a small query's cost is the queue itself. Run by hand:
//
//   node bench/queue-floor.mjs
//
// Needs Redis on loopback. Bounded in time; its keys are removed at the end, also on error.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Queue, Worker } from 'bullmq';
import Redis from 'ioredis';
import { REDIS_URL, envInt, installGuards, onCleanup, runMain } from './lib/service.mjs';

const SECONDS = envInt('BENCH_SECONDS', 8);
const CLIENTS = envInt('BENCH_CONCURRENCY', 32);
const IN_FLIGHT = [4, 16];

/** Child: a BullMQ worker that answers each job by pushing to its reply list. */
async function serve(prefix, concurrency) {
  const commands = new Redis(REDIS_URL, { enableAutoPipelining: true });
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const worker = new Worker(
    'q',
    async (job) => {
      await commands
        .multi()
        .lpush(`${prefix}:reply:${job.id}`, '1')
        .expire(`${prefix}:reply:${job.id}`, 30)
        .exec();
      return 1;
    },
    {
      connection,
      prefix,
      concurrency,
      maxStalledCount: 0,
      stalledInterval: 5000,
      lockDuration: 10000,
    },
  );
  await worker.waitUntilReady();
  process.send?.('ready');
  process.on('disconnect', () => process.exit(0));
}

async function measure(concurrency) {
  const prefix = `{bench-queue-${randomBytes(4).toString('hex')}}`;
  const child = fork(fileURLToPath(import.meta.url), ['worker', prefix, String(concurrency)]);
  onCleanup(() => child.kill());
  await new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', () => reject(new Error('queue worker exited')));
  });
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const queue = new Queue('q', { connection, prefix });
  onCleanup(async () => {
    await queue.obliterate({ force: true });
    await connection.quit();
  });
  const waiters = Array.from({ length: CLIENTS }, () => new Redis(REDIS_URL));
  onCleanup(() => Promise.all(waiters.map((w) => w.quit())));
  const latencies = [];
  let next = 0;
  const stopAt = Date.now() + SECONDS * 1000;
  await Promise.all(
    waiters.map(async (waiter) => {
      while (Date.now() < stopAt) {
        const id = `j${next++}`;
        const started = performance.now();
        await queue.add(
          'q',
          { statement: 'x'.repeat(60), username: 'u' },
          {
            jobId: id,
            attempts: 1,
            priority: 1,
            removeOnComplete: { age: 60 },
            removeOnFail: { age: 60 },
          },
        );
        await waiter.blpop(`${prefix}:reply:${id}`, 5);
        latencies.push(performance.now() - started);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const p50 = latencies[latencies.length >> 1] ?? NaN;
  console.log(`| ${concurrency} | ${Math.round(latencies.length / SECONDS)} | ${p50.toFixed(1)} |`);
  child.kill();
}

if (process.argv[2] === 'worker') {
  await serve(process.argv[3], Number(process.argv[4]));
} else {
  installGuards((SECONDS + 15) * IN_FLIGHT.length * 1000);
  await runMain(async () => {
    console.log(
      `### Queue floor — bare BullMQ round trips, ${CLIENTS} clients, ${SECONDS} s each\n`,
    );
    console.log('| jobs in flight (worker concurrency) | jobs/s | p50 ms |');
    console.log('|---:|---:|---:|');
    for (const concurrency of IN_FLIGHT) await measure(concurrency);
  });
  process.exit(process.exitCode ?? 0);
}
