import { Script, luaScripts } from './lua.script';
import type { RedisClient } from './redis.connector';
import { KeptBudget, KeptCaps, KeptRefusal } from '../capped-result.writer';
import { RedisKeys } from '../redis.keys';

/**
 * Takes back what the kept results past their expiry held (KEYS = total, held, expiry, by user,
 * owner; ARGV[1] = now): a stream that expired is gone from Redis, so are its bytes — from the
 * total and from its owner's. A hundred at a time, so that no call runs long; the next call takes
 * the rest.
 */
const RECLAIM = `
local function giveBack(id)
  local held = redis.call('HGET', KEYS[2], id)
  if held then
    redis.call('DECRBY', KEYS[1], held)
    redis.call('HDEL', KEYS[2], id)
    local owner = redis.call('HGET', KEYS[5], id)
    if owner and redis.call('HINCRBY', KEYS[4], owner, -tonumber(held)) <= 0 then
      redis.call('HDEL', KEYS[4], owner)
    end
  end
  redis.call('HDEL', KEYS[5], id)
  redis.call('ZREM', KEYS[3], id)
  return tonumber(held or '0')
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[1], 'LIMIT', 0, 100)
for _, id in ipairs(gone) do giveBack(id) end`;

/**
 * Brings what one kept result holds up to a total (ARGV = now, query id, the result's total after
 * this reservation, cap of all, expiry ms, owner, cap of the owner's): -1 (and nothing reserved)
 * when the total of all would pass its cap, -2 when the owner's would; else the total of all after.
 * Given as the result's own total rather than what to add, so that a reservation run twice (ioredis
 * sends a command again when its connection drops before the reply) counts once. A reservation
 * of what the result holds already only moves its expiry.
 */
const RESERVE = `${RECLAIM}
local total = tonumber(redis.call('GET', KEYS[1]) or '0')
local bytes = tonumber(ARGV[3]) - tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if bytes > 0 then
  local owned = tonumber(redis.call('HGET', KEYS[4], ARGV[6]) or '0')
  if owned + bytes > tonumber(ARGV[7]) then return -2 end
  if total + bytes > tonumber(ARGV[4]) then return -1 end
  redis.call('INCRBY', KEYS[1], bytes)
  redis.call('HINCRBY', KEYS[2], ARGV[2], bytes)
  redis.call('HINCRBY', KEYS[4], ARGV[6], bytes)
  redis.call('HSET', KEYS[5], ARGV[2], ARGV[6])
  total = total + bytes
end
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[2])
end
return total`;

/** Gives back all one kept result holds (ARGV = now, query id); idempotent. */
const RELEASE = `${RECLAIM}
return giveBack(ARGV[2])`;

/** The total after taking back what expired (ARGV[1] = now). */
const HELD = `${RECLAIM}
return tonumber(redis.call('GET', KEYS[1]) or '0')`;

/**
 * A reservation's expiry is counted from before the write that sets the stream's TTL: this much
 * later, so that the bytes are taken back only once the stream is surely gone.
 */
const EXPIRY_MARGIN_MS = 2000;

/**
 * The bytes all kept results hold in Redis together (SLUICE_RESULT_TOTAL_MAX_BYTES), and each
 * user's (SLUICE_RESULT_USER_MAX_BYTES). Its keys share one hash tag of their own
 * (RedisKeys.keptTotal, keptHeld, keptExpiry, keptByUser, keptOwner), so its scripts run in one
 * Redis Cluster slot and never touch a query's own keys: a writer reserves here before it appends
 * to its stream (another slot), and a result past its TTL is taken back lazily, by the next
 * reservation or reading.
 */
export class RedisKeptLedger {
  private readonly scripts: Record<'reserve' | 'release' | 'held', Script>;
  private readonly ledgerKeys: string[];

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.ledgerKeys = [
      keys.keptTotal,
      keys.keptHeld,
      keys.keptExpiry,
      keys.keptByUser,
      keys.keptOwner,
    ];
    this.scripts = luaScripts(redis, {
      reserve: [RESERVE, 5],
      release: [RELEASE, 5],
      held: [HELD, 5],
    });
  }

  /**
   * Brings what `owner`'s kept result of query `queryId` holds up to `held` bytes (it never
   * shrinks here), its stream expiring `ttlSeconds` from now; nothing reserved, and why, when all
   * kept results or the owner's would then hold more than their cap.
   */
  async reserve(
    queryId: string,
    owner: string,
    held: number,
    caps: KeptCaps,
    ttlSeconds: number,
  ): Promise<KeptRefusal | undefined> {
    const now = Date.now();
    const total = (await this.scripts.reserve(
      ...this.ledgerKeys,
      String(now),
      queryId,
      String(held),
      String(caps.total),
      String(now + ttlSeconds * 1000 + EXPIRY_MARGIN_MS),
      owner,
      String(caps.user),
    )) as number;
    if (total === -2) return 'kept-user-full';
    return total < 0 ? 'kept-full' : undefined;
  }

  /** Gives back what a query's kept result holds (it was dropped or failed). */
  async release(queryId: string): Promise<void> {
    await this.scripts.release(...this.ledgerKeys, String(Date.now()), queryId);
  }

  /** Bytes all kept results hold now. */
  async held(): Promise<number> {
    return (await this.scripts.held(...this.ledgerKeys, String(Date.now()))) as number;
  }

  /** The budget of one of `owner`'s kept results, for its CappedResultWriter. */
  budget(queryId: string, owner: string, caps: KeptCaps, ttlSeconds: number): KeptBudget {
    let held = 0;
    return {
      take: async (bytes) => {
        const refused = await this.reserve(queryId, owner, held + bytes, caps, ttlSeconds);
        if (!refused) held += bytes;
        return refused;
      },
      release: () => this.release(queryId),
    };
  }
}
