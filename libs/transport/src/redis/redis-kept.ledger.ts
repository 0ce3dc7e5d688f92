import { Script, luaScripts, scriptFile } from './lua.script';
import type { RedisClient } from './redis.connector';
import { KeptBudget, KeptCaps, KeptRefusal } from '../capped-result.writer';

/** Whose kept result: its query and the user who owns it. */
export interface KeptOf {
  queryId: string;
  owner: string;
}

/** What a kept result is held to: the caps it counts against, and how long it is kept (s). */
export interface KeptTerms {
  caps: KeptCaps;
  ttlSeconds: number;
}
import { RedisKeys } from '../redis.keys';

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
      reserve: scriptFile('reserveKept-5'),
      release: scriptFile('releaseKept-5'),
      held: scriptFile('heldKept-5'),
    });
  }

  /**
   * Brings what `owner`'s kept result of query `queryId` holds up to `held` bytes (it never
   * shrinks here), its stream expiring `ttlSeconds` from now; nothing reserved, and why, when all
   * kept results or the owner's would then hold more than their cap.
   */
  async reserve(
    { queryId, owner }: KeptOf,
    held: number,
    { caps, ttlSeconds }: KeptTerms,
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
  budget(result: KeptOf, terms: KeptTerms): KeptBudget {
    let held = 0;
    return {
      take: async (bytes) => {
        const refused = await this.reserve(result, held + bytes, terms);
        if (!refused) held += bytes;
        return refused;
      },
      release: () => this.release(result.queryId),
    };
  }
}
