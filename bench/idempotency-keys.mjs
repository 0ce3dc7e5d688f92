// What an Idempotency-Key costs Redis, through the registry's claim (dist/: the key's claim and
// its entry in the user's counted set, one script) against its floor: the bare `SET NX GET EX` of
// the same claim, which is all a key was before keys were counted per user. For each: Redis
// `used_memory` per key over BENCH_KEYS claims of one user, and claims per second with
// BENCH_CONCURRENCY in flight. Run by hand, after `npm run build`:
//
//   node bench/idempotency-keys.mjs
//
// Needs Redis on loopback. About 10 s; its keys are removed at the end, also on error.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
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

const KEYS = envInt('BENCH_KEYS', 20_000);
const CONCURRENCY = envInt('BENCH_CONCURRENCY', 200);
const TTL_SECONDS = 600;

/** As the api writes a claim: a query id and a sha256 fingerprint of the request, in hex. */
const claim = () => ({
  queryId: randomUUID(),
  fingerprint: createHash('sha256').update(randomUUID()).digest('hex'),
});

async function measure(redis, name, claimOne) {
  const before = await redisUsedMemory(redis);
  const started = process.hrtime.bigint();
  for (let made = 0; made < KEYS; made += CONCURRENCY) {
    const batch = Math.min(CONCURRENCY, KEYS - made);
    await Promise.all(Array.from({ length: batch }, () => claimOne(`client-key-${randomUUID()}`)));
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const after = await redisUsedMemory(redis);
  return { name, bytes: (after - before) / KEYS, perSecond: KEYS / seconds };
}

async function main() {
  installGuards(120_000);
  const prefix = `bench-${randomBytes(6).toString('hex')}`;
  onCleanup(() => deleteRedisKeys(prefix));
  const redis = new Redis(REDIS_URL);
  onCleanup(() => redis.disconnect());
  const keys = new RedisKeys(prefix);
  const registry = new RedisQueryRegistry(redis, keys, { seconds: TTL_SECONDS });
  const limits = { ttlSeconds: TTL_SECONDS, most: KEYS };
  const floor = await measure(redis, '`SET NX GET EX` alone (the floor)', (key) =>
    redis.call(
      'SET',
      keys.idempotency('floor', createHash('sha256').update(key).digest('hex')),
      JSON.stringify(claim()),
      'NX',
      'GET',
      'EX',
      String(TTL_SECONDS),
    ),
  );
  const sluice = await measure(redis, 'Sluice: claim and count (registry script)', async (key) => {
    const { outcome } = await registry.claimKey('ann', key, claim(), limits);
    if (outcome !== 'claimed') throw new Error(`claim ${outcome}`);
  });
  console.log(
    `\n${KEYS} keys of one user, ${CONCURRENCY} claims in flight, Redis ${REDIS_URL}, ${new Date().toISOString()}\n`,
  );
  console.log('| path | Redis bytes a key | claims/s |');
  console.log('|---|---:|---:|');
  for (const row of [floor, sluice]) {
    console.log(`| ${row.name} | ${Math.round(row.bytes)} | ${Math.round(row.perSecond)} |`);
  }
  console.log(
    `\nSluice/floor: ${(sluice.bytes / floor.bytes).toFixed(2)}× the bytes, ${(sluice.perSecond / floor.perSecond).toFixed(2)}× the rate`,
  );
}

await runMain(main);
