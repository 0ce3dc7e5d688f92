import type { OwnedSlots } from '../composed.registry';
import { SLOT_LEASE_MS } from '../query.registry';
import { RedisKeys } from '../redis.keys';
import { Script, luaScripts, scriptFile } from './lua.script';
import type { RedisClient } from './redis.connector';

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
    this.scripts = luaScripts(redis, {
      admit: scriptFile('admitSlot-1'),
      renew: scriptFile('renewSlot-1'),
    });
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
