// The floor of Sluice's architecture for bench/small-queries.mjs: the same hops as a query through
// Sluice — HTTP to an api process, a BullMQ job, a worker process that hands it to a piscina
// thread, the statement on a pg connection there, the result into a Redis stream, the api reading
// it back — each done the leanest way, with none of Sluice's own work around them (no auth, no
// validation, no admission, no registry, no lifecycle, no logging, no cancel). What Sluice costs
// above this is its own; what this costs above the direct floor is the architecture's.
//
// One file in several roles: `BENCH_SKELETON_ROLE=api` (the default) and `=worker` are processes,
// started by small-queries.mjs; the piscina threads load it again as their task (and the
// variants' threads below, as theirs).
//
// BENCH_SKELETON_CONSUMER: not the floor, variants of it (bench/skeleton-consumers.mjs compares
// them): `port`, the main thread's BullMQ worker hands each job to the least busy of the same
// threads by a plain MessagePort message, with no piscina; `thread`, each thread consumes the
// queue with a BullMQ worker of its own and runs the task itself, nothing on the main thread.
//
// Run alone (two shells):  BENCH_SKELETON_ROLE=worker node bench/skeleton-baseline.mjs
//                          node bench/skeleton-baseline.mjs   (prints its URL; Ctrl-C stops)
import { Worker as Thread, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Queue, Worker } from 'bullmq';
import Redis from 'ioredis';
import pg from 'pg';
import { Piscina } from 'piscina';
import { floorServer } from './lib/floor-server.mjs';

const databaseUrl =
  process.env.BENCH_DATABASE_URL ??
  process.env.DATABASE_URL ??
  'postgresql://root@127.0.0.1:5432/test';
const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
// A bench run's own prefix (its keys are removed by prefix at the end) with a hash tag, as Sluice's.
const prefix = process.env.BENCH_SKELETON_PREFIX ?? '{bench-skeleton}';
const QUEUE = 'skeleton';
const THREADS = 2;
// As many statements a thread at once as Sluice's pool runs in the same run (its setting, its
// default): the same slots on both sides. The skeleton gains more from more of them than Sluice
// does (bench/RESULTS.md, 2026-12-06, fifth session).
const TASKS_PER_THREAD = Number(process.env.SLUICE_TASKS_PER_THREAD ?? 4);
if (!Number.isInteger(TASKS_PER_THREAD) || TASKS_PER_THREAD < 1) {
  const got = process.env.SLUICE_TASKS_PER_THREAD;
  throw new Error(`SLUICE_TASKS_PER_THREAD must be a positive integer, got "${got}"`);
}
// As Sluice's: a job is kept a while after it ends, and never retried.
const JOB_OPTIONS = {
  attempts: 1,
  removeOnComplete: { age: 60 },
  removeOnFail: { age: 60 },
};

const streamKey = (id) => `${prefix}:${id}:out`;
const quoteIdent = (name) => '"' + name.replace(/"/g, '""') + '"';
// Sluice runs every statement under its user's role: so does the floor, as its login role.
const role = quoteIdent(decodeURIComponent(new URL(databaseUrl).username) || 'postgres');

// ---------------------------------------------------------------------------------------------
// Piscina thread: run the statement under a role in a transaction, one round trip, and put the
// JSON body into the query's stream.

let database;
let redis;

export default async function runTask({ id, statement }) {
  database ??= new pg.Pool({ connectionString: databaseUrl, max: TASKS_PER_THREAD });
  redis ??= new Redis(redisUrl, { enableAutoPipelining: true });
  const client = await database.connect();
  let body;
  try {
    const results = await client.query({
      text: `BEGIN; SET LOCAL ROLE ${role}; ${statement}; COMMIT`,
      rowMode: 'array',
    });
    const rows = results[2].rows;
    body = JSON.stringify({
      query_id: id,
      data: rows,
      status: { reason: 'OK', sql_state: '00000', vendor_code: 0, row_count: rows.length },
    });
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    body = JSON.stringify({ query_id: id, status: { reason: String(err?.message ?? err) } });
  } finally {
    client.release();
  }
  await redis.multi().xadd(streamKey(id), '*', 'b', body).pexpire(streamKey(id), 60_000).exec();
}

// ---------------------------------------------------------------------------------------------
// Worker process: one BullMQ worker feeding the thread pool.

/** A BullMQ worker of the queue on a connection of its own, ready. */
async function consume(processor, concurrency) {
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const consumer = new Worker(QUEUE, processor, {
    connection,
    prefix,
    concurrency,
    maxStalledCount: 0,
    stalledInterval: 5_000,
    lockDuration: 10_000,
  });
  await consumer.waitUntilReady();
  return consumer;
}

async function worker() {
  const pool = new Piscina({
    filename: new URL(import.meta.url).href,
    minThreads: THREADS,
    maxThreads: THREADS,
    concurrentTasksPerWorker: TASKS_PER_THREAD,
  });
  const consumer = await consume((job) => pool.run(job.data), THREADS * TASKS_PER_THREAD);
  console.log('skeleton worker ready');
  const stop = () =>
    consumer
      .close()
      .then(() => pool.destroy())
      .then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

// BENCH_SKELETON_CONSUMER=port: the main thread's BullMQ worker, threads of our own.
async function portWorker() {
  const threads = await startThreads('port');
  const busy = threads.map(() => 0);
  const waiting = new Map();
  let next = 0;
  threads.forEach((thread, i) =>
    thread.on('message', (id) => {
      busy[i]--;
      waiting.get(id)();
      waiting.delete(id);
    }),
  );
  const run = (data) =>
    new Promise((done) => {
      const i = busy.indexOf(Math.min(...busy));
      busy[i]++;
      const id = next++;
      waiting.set(id, done);
      threads[i].postMessage({ id, data });
    });
  await consume((job) => run(job.data), THREADS * TASKS_PER_THREAD);
  console.log('skeleton worker ready');
  const stop = () => Promise.all(threads.map((t) => t.terminate())).then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

async function portThread() {
  parentPort.on('message', ({ id, data }) => runTask(data).then(() => parentPort.postMessage(id)));
  parentPort.postMessage('ready');
}

async function startThreads(role) {
  const threads = Array.from(
    { length: THREADS },
    () => new Thread(new URL(import.meta.url), { workerData: { role } }),
  );
  await Promise.all(threads.map((thread) => new Promise((ready) => thread.once('message', ready))));
  return threads;
}

// BENCH_SKELETON_CONSUMER=thread: the same threads, each its own BullMQ worker.
async function threadConsumers() {
  const threads = await startThreads('consumer');
  console.log('skeleton worker ready');
  const stop = () => Promise.all(threads.map((t) => t.terminate())).then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

async function threadConsumer() {
  await consume((job) => runTask(job.data), TASKS_PER_THREAD);
  parentPort.postMessage('ready');
}

// ---------------------------------------------------------------------------------------------
// Api process: enqueue, then block on the query's stream on a connection of its own (kept for the
// next request) until the body is there.

async function api() {
  const commands = new Redis(redisUrl, { enableAutoPipelining: true });
  const queue = new Queue(QUEUE, { connection: new Redis(redisUrl), prefix });
  const idle = [];
  let next = 0;

  async function answer(statement) {
    const id = `${process.pid}-${next++}`;
    await queue.add('q', { id, statement }, { jobId: id, ...JOB_OPTIONS });
    const reader = idle.pop() ?? new Redis(redisUrl);
    try {
      const reply = await reader.xread('BLOCK', 10_000, 'STREAMS', streamKey(id), '0');
      if (!reply) throw new Error('no result within 10 s');
      return reply[0][1][0][1][1];
    } finally {
      idle.push(reader);
      void commands.unlink(streamKey(id));
    }
  }

  const server = floorServer(answer);
  server.listen(0, '127.0.0.1', () => {
    console.log(`skeleton api on http://127.0.0.1:${server.address().port}`);
  });
  const stop = () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

if (isMainThread) {
  if (process.env.BENCH_SKELETON_ROLE !== 'worker') await api();
  else if (process.env.BENCH_SKELETON_CONSUMER === 'thread') await threadConsumers();
  else if (process.env.BENCH_SKELETON_CONSUMER === 'port') await portWorker();
  else await worker();
} else if (workerData?.role === 'consumer') await threadConsumer();
else if (workerData?.role === 'port') await portThread();
