// What a finished query's record costs Redis, through the registry (dist/): its hash and its
// entries in the index of everyone's queries and in its owner's, written as the api and the
// worker write them (create, running, succeeded). Redis `used_memory` per query over BENCH_QUERIES
// queries of one user, with the shortest statement and with one of the 200 characters a record
// keeps at most; and queries a second through the registry with the owner's index trimmed as it
// goes (SLUICE_QUERY_RETENTION_COUNT 1000) against the same with nothing past the count to trim.
// Run by hand, after `npm run build`:
//
//   node bench/query-records.mjs
//
// Needs Redis on loopback. About 10 s; its keys are removed at the end, also on error.
import { randomBytes, randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import {
  REDIS_URL,
  deleteRedisKeys,
  envInt,
  installGuards,
  onCleanup,
  redisUsedMemory,
  requireDist,
  runMain,
} from './lib/service.mjs';

const { RedisKeys, RedisQueryRegistry } = requireDist('libs/transport/src/index.js');

const QUERIES = envInt('BENCH_QUERIES', 10_000);
const CONCURRENCY = envInt('BENCH_CONCURRENCY', 100);
const SHORT = 'select 1';
const LONG = `select ${'x'.repeat(193)}`; // 200 characters: what a record keeps at most

async function measure(redis, name, statement, count) {
  const prefix = `bench-${randomBytes(6).toString('hex')}`;
  onCleanup(() => deleteRedisKeys(prefix));
  const registry = new RedisQueryRegistry(redis, new RedisKeys(prefix), { seconds: 3600, count });
  const one = async () => {
    const queryId = randomUUID();
    await registry.create({
      queryId,
      owner: 'ann',
      state: 'queued',
      database: 'test',
      format: 'json',
      lane: 'interactive',
      statement,
      createdAt: Date.now(),
      rows: 0,
      bytes: 0,
    });
    await registry.transition(queryId, 'running', { startedAt: Date.now() }, false);
    const status = { reason: 'OK', sql_state: '00000', vendor_code: 0 };
    const produced = { rows: 10, bytes: 600, rowsProduced: 10, bytesProduced: 600 };
    await registry.transition(queryId, 'succeeded', { ...produced, status }, false);
  };
  const before = await redisUsedMemory(redis);
  const started = process.hrtime.bigint();
  for (let made = 0; made < QUERIES; made += CONCURRENCY) {
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, QUERIES - made) }, one));
  }
  await registry.close();
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const after = await redisUsedMemory(redis);
  const kept = await redis.zcard(new RedisKeys(prefix).userQueries('ann'));
  return { name, bytes: (after - before) / kept, perSecond: QUERIES / seconds, kept };
}

async function main() {
  installGuards(120_000);
  const redis = new Redis(REDIS_URL);
  onCleanup(() => redis.disconnect());
  const rows = [
    await measure(redis, `statement of ${SHORT.length} characters`, SHORT, QUERIES),
    await measure(redis, `statement of ${LONG.length} characters`, LONG, QUERIES),
    await measure(redis, `statement of ${SHORT.length}, count 1000: trimmed`, SHORT, 1000),
  ];
  console.log(
    `\n${QUERIES} queries of one user, ${CONCURRENCY} in flight, Redis ${REDIS_URL}, ${new Date().toISOString()}\n`,
  );
  console.log('| records | kept at the end | Redis bytes a kept record | queries/s |');
  console.log('|---|---:|---:|---:|');
  for (const row of rows) {
    console.log(
      `| ${row.name} | ${row.kept} | ${Math.round(row.bytes)} | ${Math.round(row.perSecond)} |`,
    );
  }
}

await runMain(main);
