import Redis, { Cluster } from 'ioredis';
import { once } from 'node:events';
import { e2eEnv } from './client';
import type { E2eEnvironment } from './service';

/** A connection to the suite's Redis, whichever deployment it is (one node, Cluster, Sentinel). */
export type TestRedis = Redis | Cluster;

/** Connects to the Redis the suite's processes use, the way `redisEnv` tells them to. */
export function connectTestRedis(env: E2eEnvironment = e2eEnv()): TestRedis {
  const { redisEnv } = env;
  const list = (value: string) =>
    value.split(',').map((hostPort) => {
      const [host, port] = hostPort.split(':');
      return { host, port: Number(port) };
    });
  if (redisEnv.SLUICE_REDIS_CLUSTER_NODES) {
    return new Cluster(list(redisEnv.SLUICE_REDIS_CLUSTER_NODES));
  }
  if (redisEnv.SLUICE_REDIS_SENTINELS) {
    return new Redis({
      sentinels: list(redisEnv.SLUICE_REDIS_SENTINELS),
      name: redisEnv.SLUICE_REDIS_SENTINEL_NAME,
    });
  }
  return new Redis(redisEnv.REDIS_URL ?? env.redisUrl);
}

/** Every key matching `pattern`; in a Redis Cluster, on every master. */
export async function keysMatching(redis: TestRedis, pattern: string): Promise<string[]> {
  if (redis instanceof Cluster && redis.status !== 'ready') await once(redis, 'ready');
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  const keys: string[] = [];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
      cursor = next;
      keys.push(...found);
    } while (cursor !== '0');
  }
  return keys;
}

/** Removes keys one by one: a Redis Cluster refuses a multi-key UNLINK across slots. */
export async function unlinkEach(redis: TestRedis, keys: string[]): Promise<void> {
  await Promise.all(keys.map((key) => redis.unlink(key)));
}
