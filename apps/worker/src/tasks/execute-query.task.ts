import Redis from 'ioredis';
import { workerData } from 'piscina';
import { ExecuteJobData } from '@app/contracts';
import { RedisKeys, RedisResultWriter } from '@app/transport';
import { DatabaseRegistry } from './database.registry';
import { ExecutionOutcome, QueryRunner } from './query.runner';
import { ThreadSettings } from './thread.settings';

// Piscina entry: one thread's connections are made once and shared by the tasks it runs.
const settings = workerData as ThreadSettings;
const keys = new RedisKeys(settings.keyPrefix);
const databases = new DatabaseRegistry(settings.databaseUrl, settings.pgPoolSize);
const runner = new QueryRunner(databases, settings);
let redis: Redis | undefined;

function connection(): Redis {
  if (!redis) {
    redis = new Redis(settings.redisUrl!, { maxRetriesPerRequest: 3, enableAutoPipelining: true });
    redis.on('error', () => undefined);
  }
  return redis;
}

/** Runs one execution job and writes its result to the query's Redis stream. */
export default async function executeQuery(job: ExecuteJobData): Promise<ExecutionOutcome> {
  const writer = new RedisResultWriter(
    connection(),
    keys,
    job.queryId,
    {
      chunks: settings.windowChunks,
      bytes: settings.windowBytes,
      idleTimeoutMs: settings.clientIdleTimeoutMs,
    },
    settings.streamTtlSeconds,
  );
  return runner.run(job, writer);
}

/** Start-up check: the thread loaded and reaches the default database. */
export async function ping(): Promise<string> {
  const client = await databases.get(undefined).pool.connect();
  try {
    const { rows } = await client.query<{ v: string }>('SELECT version() AS v');
    return rows[0].v;
  } finally {
    client.release();
  }
}
