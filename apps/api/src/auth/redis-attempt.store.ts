import type Redis from 'ioredis';
import { AttemptCount, AttemptStore } from './attempt.store';

// INCR, and start the window on the first failure: atomic, one key.
const ADD_SCRIPT = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`;

/**
 * Failed logins counted in Redis, shared by every api process. Keys live under the deployment's
 * prefix and expire with their window; each command touches one key (Redis Cluster safe).
 */
export class RedisAttemptStore implements AttemptStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  async get(key: string): Promise<AttemptCount> {
    const name = this.key(key);
    const [count, ttl] = await Promise.all([this.redis.get(name), this.redis.pttl(name)]);
    return { failures: Number(count ?? 0), resetInMs: Math.max(0, ttl) };
  }

  async add(key: string, windowSeconds: number): Promise<void> {
    await this.redis.eval(ADD_SCRIPT, 1, this.key(key), String(windowSeconds * 1000));
  }

  async clear(key: string): Promise<void> {
    await this.redis.del(this.key(key));
  }

  // Built here rather than in RedisKeys (libs/transport): the key belongs to the api's auth only.
  private key(key: string): string {
    return `${this.prefix}:login:{${key}}`;
  }
}
