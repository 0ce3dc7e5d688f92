import type { OwnedKeys } from '../composed.registry';
import { createHash } from 'node:crypto';
import { IdempotencyClaim, KeyClaim, KeyLimits, UserKey } from '../query.registry';
import { RedisKeys } from '../redis.keys';
import { Script, luaScript, scriptFile } from './lua.script';
import type { RedisClient } from './redis.connector';

/**
 * Idempotency-Key claims in Redis: a key per claim, named by the digest of the key's text, and a
 * sorted set per user of the user's live ones, scored by expiry (both carry the user's hash tag).
 */
export class RedisIdempotencyKeys implements OwnedKeys {
  private readonly claim: Script;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
  ) {
    this.claim = luaScript(redis, scriptFile('claimIdempotencyKey-2'));
  }

  async claimKey(
    { owner, key }: UserKey,
    claim: IdempotencyClaim,
    limits: KeyLimits,
  ): Promise<KeyClaim> {
    const digest = keyDigest(key);
    const now = Date.now();
    const [outcome, value] = (await this.claim(
      this.keys.idempotency(owner, digest),
      this.keys.idempotencyKeys(owner),
      JSON.stringify(claim),
      String(limits.ttlSeconds * 1000),
      String(now),
      String(limits.most),
      digest,
    )) as [string, string?];
    if (outcome === 'held') {
      const held = JSON.parse(value!) as IdempotencyClaim;
      // This query's own claim, run again by ioredis after its connection dropped before the reply.
      if (held.queryId === claim.queryId) return { outcome: 'claimed' };
      return { outcome, claim: held };
    }
    if (outcome === 'full') return { outcome, freeInMs: Math.max(0, Number(value) - now) };
    return { outcome: 'claimed' };
  }

  async releaseKey({ owner, key }: UserKey): Promise<void> {
    const digest = keyDigest(key);
    await this.redis
      .multi()
      .del(this.keys.idempotency(owner, digest))
      .zrem(this.keys.idempotencyKeys(owner), digest)
      .exec();
  }

  /** Drops every claim of `owner`'s (the keys share the owner's hash tag: one UNLINK). */
  async forgetOwner(owner: string): Promise<void> {
    const index = this.keys.idempotencyKeys(owner);
    const digests = await this.redis.zrange(index, 0, -1);
    await this.redis.unlink(
      index,
      ...digests.map((digest) => this.keys.idempotency(owner, digest)),
    );
  }
}

/** An idempotency key's text, hashed: any 255 characters make a key name of one length. */
function keyDigest(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}
