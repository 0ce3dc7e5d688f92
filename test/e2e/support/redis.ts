import { spawn } from 'node:child_process';
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

/** A command Redis ran, as MONITOR shows it: its name (lower case), its arguments, its client. */
export interface SeenCommand {
  command: string;
  args: string[];
  /** `host:port` of the client that sent it, or `lua` for a command a script ran. */
  source: string;
}

/** The arguments of a MONITOR line, each as sent (redis-cli quotes them, escaping as C does). */
function monitoredArgs(line: string): string[] {
  const args: string[] = [];
  for (const [, quoted] of line.matchAll(/"((?:[^"\\]|\\.)*)"/g)) {
    args.push(
      quoted.replace(/\\(x[0-9a-f]{2}|.)/g, (_, c: string) =>
        c.length === 3
          ? String.fromCharCode(parseInt(c.slice(1), 16))
          : (({ n: '\n', r: '\r', t: '\t' } as Record<string, string>)[c] ?? c),
      ),
    );
  }
  return args;
}

/**
 * Watches every command the suite's Redis runs (one node: the default run's single Redis), with
 * `redis-cli monitor` in a child process: ioredis's monitor mode loses its place in its reply
 * queue when a busy server's lines come fast ("Command queue state error").
 */
export async function monitorRedis(
  env: E2eEnvironment = e2eEnv(),
): Promise<{ seen: SeenCommand[]; stop: () => Promise<void> }> {
  const url = new URL(env.redisEnv.REDIS_URL ?? env.redisUrl);
  const child = spawn('redis-cli', ['-h', url.hostname, '-p', url.port || '6379', 'monitor'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const seen: SeenCommand[] = [];
  let rest = '';
  let ready: () => void;
  const started = new Promise<void>((resolve) => (ready = resolve));
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop()!;
    for (const line of lines) {
      if (line.trim() === 'OK') ready();
      const at = /^[0-9.]+ \[\d+ ([^\]]+)\] /.exec(line);
      if (!at) continue;
      const args = monitoredArgs(line.slice(at[0].length));
      seen.push({ command: (args[0] ?? '').toLowerCase(), args, source: at[1] });
    }
  });
  await Promise.race([
    started,
    once(child, 'exit').then(() => {
      throw new Error('redis-cli monitor exited before it began');
    }),
  ]);
  return {
    seen,
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill();
      await once(child, 'exit');
    },
  };
}
