import type { OwnedSlots } from '../composed.registry';
import { SLOT_LEASE_MS } from '../query.registry';
import { RedisKeys } from '../redis.keys';
import { Script, luaScripts } from './lua.script';
import type { RedisClient } from './redis.connector';

/**
 * Counts a query against its owner in one round trip (KEYS[1] = the owner's set, scored by each
 * slot's deadline; ARGV = now, cap, deadline, query id, lease ms): drops the slots past their
 * deadline, then returns the count before, or -1 when the cap is reached; a query that holds its
 * slot already (the script sent again after a lost reply) is counted once. The set lives as long
 * as its longest lease: a short one never cuts a long one (a kept query's, held through its
 * queue wait).
 */
const ADMIT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
local before = redis.call('ZCARD', KEYS[1])
if redis.call('ZSCORE', KEYS[1], ARGV[4]) then before = before - 1
elseif before >= tonumber(ARGV[2]) then return -1 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
return before`;

/**
 * Pushes a slot's deadline forward, only while the slot is still there (KEYS[1] = the owner's
 * set; ARGV = deadline, query id, lease ms): a beat that comes after the release adds nothing.
 */
const RENEW = `
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 1`;

/**
 * Each user's slots in Redis: a sorted set per user (its key carries the user's hash tag) of the
 * queries that hold one, scored by each slot's deadline.
 */
export class RedisQuerySlots implements OwnedSlots {
  private readonly scripts: Record<'admit' | 'renew', Script>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    readonly slotLeaseMs = SLOT_LEASE_MS,
  ) {
    this.scripts = luaScripts(redis, { admit: [ADMIT], renew: [RENEW] });
  }

  async admit(owner: string, queryId: string, cap: number): Promise<number | undefined> {
    const now = Date.now();
    const before = (await this.scripts.admit(
      this.keys.userSlots(owner),
      String(now),
      String(cap),
      String(now + this.slotLeaseMs),
      queryId,
      String(this.slotLeaseMs),
    )) as number;
    return before < 0 ? undefined : before;
  }

  async renew(owner: string, queryId: string, leaseMs = this.slotLeaseMs): Promise<void> {
    await this.scripts.renew(
      this.keys.userSlots(owner),
      String(Date.now() + leaseMs),
      queryId,
      String(leaseMs),
    );
  }

  async release(owner: string, queryId: string): Promise<void> {
    await this.redis.zrem(this.keys.userSlots(owner), queryId);
  }

  /** The queries of `owner`'s whose slots are held now. */
  openOf(owner: string): Promise<string[]> {
    return this.redis.zrangebyscore(this.keys.userSlots(owner), Date.now(), '+inf');
  }

  /** Drops every slot of `owner`'s; returns the queries that held one (their lease may have lapsed). */
  async forgetOwner(owner: string): Promise<string[]> {
    const index = this.keys.userSlots(owner);
    const [open] = await Promise.all([this.redis.zrange(index, 0, -1), this.redis.unlink(index)]);
    return open;
  }
}
