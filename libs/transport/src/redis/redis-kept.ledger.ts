import type { RedisClient } from './redis.connector';
import { KeptBudget } from '../capped-result.writer';
import { RedisKeys } from '../redis.keys';

/**
 * Takes back what the kept results past their expiry held (KEYS = total, held, expiry; ARGV[1] =
 * now): a stream that expired is gone from Redis, so are its bytes. A hundred at a time, so that
 * no call runs long; the next call takes the rest.
 */
const RECLAIM = `
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[1], 'LIMIT', 0, 100)
for _, id in ipairs(gone) do
  local held = redis.call('HGET', KEYS[2], id)
  if held then
    redis.call('DECRBY', KEYS[1], held)
    redis.call('HDEL', KEYS[2], id)
  end
  redis.call('ZREM', KEYS[3], id)
end`;

/**
 * Reserves bytes for one kept result (ARGV = now, query id, bytes, cap, expiry ms): -1 (and
 * nothing reserved) when the total would pass the cap; else the total after. A reservation of 0
 * only moves the result's expiry.
 */
const RESERVE = `${RECLAIM}
local total = tonumber(redis.call('GET', KEYS[1]) or '0')
local bytes = tonumber(ARGV[3])
if bytes > 0 then
  if total + bytes > tonumber(ARGV[4]) then return -1 end
  redis.call('INCRBY', KEYS[1], bytes)
  redis.call('HINCRBY', KEYS[2], ARGV[2], bytes)
  total = total + bytes
end
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[2])
end
return total`;

/** Gives back all one kept result holds (ARGV[1] = query id); idempotent. */
const RELEASE = `
local held = redis.call('HGET', KEYS[2], ARGV[1])
if held then
  redis.call('DECRBY', KEYS[1], held)
  redis.call('HDEL', KEYS[2], ARGV[1])
end
redis.call('ZREM', KEYS[3], ARGV[1])
return tonumber(held or '0')`;

/** The total after taking back what expired (ARGV[1] = now). */
const HELD = `${RECLAIM}
return tonumber(redis.call('GET', KEYS[1]) or '0')`;

/**
 * A reservation's expiry is counted from before the write that sets the stream's TTL: this much
 * later, so that the bytes are taken back only once the stream is surely gone.
 */
const EXPIRY_MARGIN_MS = 2000;

type LedgerScript = (
  total: string,
  held: string,
  expiry: string,
  ...args: string[]
) => Promise<unknown>;

/**
 * The bytes all kept results hold in Redis together (SLUICE_RESULT_TOTAL_MAX_BYTES). Its keys share
 * one hash tag of their own (RedisKeys.keptTotal, keptHeld, keptExpiry), so its scripts run in one
 * Redis Cluster slot and never touch a query's own keys: a writer reserves here before it appends
 * to its stream (another slot), and a result past its TTL is taken back lazily, by the next
 * reservation or reading.
 */
export class RedisKeptLedger {
  private readonly scripts: Record<'reserve' | 'release' | 'held', LedgerScript>;
  private readonly ledgerKeys: [string, string, string];

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.ledgerKeys = [keys.keptTotal, keys.keptHeld, keys.keptExpiry];
    const define = (name: string, lua: string): LedgerScript => {
      redis.defineCommand(name, { numberOfKeys: 3, lua });
      return (redis as unknown as Record<string, LedgerScript>)[name].bind(redis);
    };
    this.scripts = {
      reserve: define('sluiceKeptReserve', RESERVE),
      release: define('sluiceKeptRelease', RELEASE),
      held: define('sluiceKeptHeld', HELD),
    };
  }

  /**
   * Reserves `bytes` for a query's kept result, whose stream expires `ttlSeconds` from now; false
   * (nothing reserved) when all kept results would then hold more than `cap`.
   */
  async reserve(queryId: string, bytes: number, cap: number, ttlSeconds: number): Promise<boolean> {
    const now = Date.now();
    const total = (await this.scripts.reserve(
      ...this.ledgerKeys,
      String(now),
      queryId,
      String(bytes),
      String(cap),
      String(now + ttlSeconds * 1000 + EXPIRY_MARGIN_MS),
    )) as number;
    return total >= 0;
  }

  /** Gives back what a query's kept result holds (it was dropped or failed). */
  async release(queryId: string): Promise<void> {
    await this.scripts.release(...this.ledgerKeys, queryId);
  }

  /** Bytes all kept results hold now. */
  async held(): Promise<number> {
    return (await this.scripts.held(...this.ledgerKeys, String(Date.now()))) as number;
  }

  /** The budget of one query's kept result, for its CappedResultWriter. */
  budget(queryId: string, cap: number, ttlSeconds: number): KeptBudget {
    return {
      take: (bytes) => this.reserve(queryId, bytes, cap, ttlSeconds),
      release: () => this.release(queryId),
    };
  }
}
