import type { RecordTrim } from '../composed.registry';
import { RecordRetention } from '../query.registry';
import { RedisKeys } from '../redis.keys';
import { Script, luaScripts } from './lua.script';
import { type RedisClient, isClusterClient } from './redis.connector';
import { RedisKeptLedger } from './redis-kept.ledger';
import { FINAL_LIST, OPEN_TTL_SECONDS } from './redis-query.records';

/**
 * Forgets a finished query's record unless its result is kept (`meta`; ARGV[1] = the final
 * states, as `,a,b,`). True when the record is gone (now, or lapsed before); false when it stays:
 * its query is still open, or its result is kept to be fetched.
 */
const FORGET_FUNCTION = `
local function forget(meta)
  local fields = redis.call('HMGET', meta, 'state', 'kept')
  if not fields[1] then return true end
  if fields[2] == 'true' or not string.find(ARGV[1], ',' .. fields[1] .. ',', 1, true) then return false end
  redis.call('UNLINK', meta)
  return true
end`;

/** One record (KEYS[1] = meta): 1 when it is gone, 0 when it stays. In Redis Cluster. */
const FORGET = `${FORGET_FUNCTION}
if forget(KEYS[1]) then return 1 end
return 0`;

/**
 * A batch of index entries in one step (KEYS[1] = the index, KEYS[2..] = metas; ARGV[2..] = their
 * query ids): forgets each record, drops the entry of each that is gone, and returns how many
 * went. Outside Redis Cluster only, where a script may touch the keys of many queries.
 */
const FORGET_MANY = `${FORGET_FUNCTION}
local gone = 0
for i = 2, #KEYS do
  if forget(KEYS[i]) then
    redis.call('ZREM', KEYS[1], ARGV[i])
    gone = gone + 1
  end
end
return gone`;

/**
 * Looks at a kept result past the newest `keptCount` (`meta`, `out`; ARGV[1] = the final states,
 * ARGV[2] = the kept index's bound: the score of the oldest of the newest `keptCount`): -1 when
 * it is gone, with its record (it ended before the bound, or its record lapsed); 0 when its query
 * is still open; else the time it ended, after the bound — it is among the newest by its end, and
 * is moved there in the index.
 */
const FORGET_KEPT_FUNCTION = `
local function forgetKept(meta, out)
  local fields = redis.call('HMGET', meta, 'state', 'finishedAt')
  if fields[1] and not string.find(ARGV[1], ',' .. fields[1] .. ',', 1, true) then return 0 end
  local ended = tonumber(fields[2] or '0')
  if fields[1] and ended >= tonumber(ARGV[2]) then return ended end
  redis.call('UNLINK', meta, out)
  return -1
end`;

/** One kept result (KEYS = meta, out): as FORGET_KEPT_FUNCTION. In Redis Cluster. */
const FORGET_KEPT = `${FORGET_KEPT_FUNCTION}
return forgetKept(KEYS[1], KEYS[2])`;

/**
 * A batch of kept results in one step (KEYS[1], KEYS[2] = the index and the user's kept index,
 * then meta and out of each; ARGV[3..] = their query ids): forgets each that may go and drops its
 * entries, moves each that ended late, and returns the query ids of those gone and how many stay
 * open. Outside Redis Cluster only.
 */
const FORGET_KEPT_MANY = `${FORGET_KEPT_FUNCTION}
local gone, open = {}, 0
for i = 3, #ARGV do
  local left = forgetKept(KEYS[2 * i - 3], KEYS[2 * i - 2])
  if left < 0 then
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('ZREM', KEYS[2], ARGV[i])
    gone[#gone + 1] = ARGV[i]
  elseif left > 0 then
    redis.call('ZADD', KEYS[2], left, ARGV[i])
  else
    open = open + 1
  end
end
return {gone, open}`;

/** How often the index of everyone's queries and the kept results are trimmed, by default. */
const TRIM_EVERY_MS = 10_000;
/** Index entries looked at in one round trip of a trim, and in all of one trim at most. */
const TRIM_BATCH = 200;
const TRIM_MOST = 200_000;
/**
 * Entries the index of every user's queries keeps (an administrator's listing reads the newest
 * hundreds): the records themselves are counted per user, in each user's index.
 */
const INDEX_MOST = 10_000;

/**
 * Entries a user's index holds past the count before it is trimmed: a trim for a batch of
 * queries, not for each.
 */
function trimSlack(count: number): number {
  return Math.max(1, Math.ceil(count / 10));
}

/**
 * Keeps the registry's records within RecordRetention: every user's index of queries by its
 * count (as soon as a query is seen past it, by told()), and on a timer of its own (start()) the
 * index of everyone's queries and each user's kept results, by one process at a time.
 */
export class RedisRecordTrim implements RecordTrim {
  private readonly scripts: Record<
    'forget' | 'forgetMany' | 'forgetKept' | 'forgetKeptMany',
    Script
  >;
  /** Where a kept result's bytes are counted: given back when the trim drops the result. */
  private keptLedger: RedisKeptLedger | undefined;
  private readonly trimEveryMs: number;
  private timer: NodeJS.Timeout | undefined;
  private trimming: Promise<void> = Promise.resolve();
  /** Users whose index this process is trimming (see trimQueriesOf): one trim each at a time. */
  private readonly userTrims = new Map<string, Promise<void>>();
  /** Users whose index this process saw past the count since it last trimmed it. */
  private readonly pastCount = new Set<string>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly retention: RecordRetention,
  ) {
    this.trimEveryMs = retention.trimEveryMs ?? TRIM_EVERY_MS;
    this.scripts = luaScripts(redis, {
      forget: [FORGET],
      forgetMany: [FORGET_MANY, 0],
      forgetKept: [FORGET_KEPT, 2],
      forgetKeptMany: [FORGET_KEPT_MANY, 0],
    });
  }

  /** The ledger, made at the first kept result dropped: its scripts go on the connection then. */
  private get ledger(): RedisKeptLedger {
    return (this.keptLedger ??= new RedisKeptLedger(this.redis, this.keys));
  }

  /**
   * Trims every trimEveryMs until close(): the index of everyone's, the kept results (under a
   * lock that one process takes an interval), and the users seen past the count. A failed trim is
   * left to the next: nothing is lost meanwhile, every record lapses by its TTL.
   */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.trimming = this.trimming
        .then(async () => {
          await this.trimOnce();
          await Promise.all([...this.pastCount].map((owner) => this.trimUser(owner)));
        })
        .catch(() => {
          // Nothing is lost: the next interval trims again, and records lapse by their TTL.
        });
    }, this.trimEveryMs);
    // Trimming alone keeps no process alive.
    this.timer.unref();
  }

  /**
   * Hears that `owner`'s index of queries holds `indexed` entries (a query was just added): past
   * the count by a batch's slack, the index is trimmed now, beside the query, never in its way.
   */
  told(owner: string, indexed: number): void {
    const { count } = this.retention;
    if (indexed <= count) return;
    this.pastCount.add(owner);
    if (indexed > count + trimSlack(count)) void this.trimUser(owner);
  }

  /** Trims now: the index of everyone's, the kept results, and the users seen past the count. */
  async trim(): Promise<void> {
    await this.settled();
    await this.trimOnce(true);
    await Promise.all([...this.pastCount].map((owner) => this.trimQueriesOf(owner)));
  }

  /** Stops the timer and waits for the trims under way: the connection may be closed next. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.settled();
  }

  private async settled(): Promise<void> {
    await Promise.all([this.trimming, ...this.userTrims.values()]);
  }

  /** Trims a user's index unless this process is at it already; never in the way of a query. */
  private trimUser(owner: string): Promise<void> {
    const under = this.userTrims.get(owner);
    if (under) return under;
    const trimmed = this.trimQueriesOf(owner)
      .catch(() => {
        // Nothing is lost: the owner's next query past the count tries again, and every record
        // lapses by its TTL meanwhile.
      })
      .finally(() => this.userTrims.delete(owner));
    this.userTrims.set(owner, trimmed);
    return trimmed;
  }

  /**
   * Forgets a user's finished queries past the newest `retention.count` of theirs (kept results
   * are not among them: trimKept counts those), oldest first. Only entries older than the oldest
   * of the newest `count` are looked at (times are ms: those of its own ms wait for a later trim),
   * so that none of the newest is ever forgotten, whoever else trims meanwhile. Those still open
   * stay at the bottom of the index (admission bounds how many), and the next batch follows them.
   */
  private async trimQueriesOf(owner: string): Promise<void> {
    this.pastCount.delete(owner);
    const index = this.keys.userQueries(owner);
    await this.redis.zremrangebyscore(index, '-inf', Date.now() - OPEN_TTL_SECONDS * 1000);
    const { count } = this.retention;
    let until = '+inf';
    if (count > 0) {
      const [, bound] = await this.redis.zrevrange(index, count - 1, count - 1, 'WITHSCORES');
      if (bound === undefined) return;
      until = `(${bound}`;
    }
    let open = 0;
    for (let seen = 0; seen < TRIM_MOST;) {
      const ids = await this.redis.zrangebyscore(index, '-inf', until, 'LIMIT', open, TRIM_BATCH);
      seen += ids.length;
      if (ids.length > 0) open += ids.length - (await this.forget(ids, index));
      if (ids.length < TRIM_BATCH) return;
    }
  }

  /**
   * Caps the index of everyone's queries, then trims the kept results. One process does it at a
   * time (a lock for one interval); `force` ignores the lock.
   */
  private async trimOnce(force = false): Promise<void> {
    if (!force) {
      const locked = await this.redis.set(
        this.keys.queriesTrimLock,
        '1',
        'PX',
        this.trimEveryMs,
        'NX',
      );
      if (locked === null) return;
    }
    const { queries } = this.keys;
    await this.redis.zremrangebyscore(queries, '-inf', Date.now() - OPEN_TTL_SECONDS * 1000);
    await this.redis.zremrangebyrank(queries, 0, -(INDEX_MOST + 1));
    await this.trimKept();
  }

  /**
   * Forgets the records of `ids` that may go, and their entries in `index` (see FORGET): returns
   * how many went. Their entries in the index of everyone's queries go when it is capped, or
   * when a listing finds them gone.
   */
  private async forget(ids: string[], index: string): Promise<number> {
    if (!isClusterClient(this.redis)) {
      const metas = ids.map((id) => this.keys.meta(id));
      return (await this.scripts.forgetMany(
        String(ids.length + 1),
        index,
        ...metas,
        FINAL_LIST,
        ...ids,
      )) as number;
    }
    // Every record in a hash slot of its own: a script each (auto-pipelined), then the index.
    const gone = await Promise.all(
      ids.map((id) => this.scripts.forget(this.keys.meta(id), FINAL_LIST)),
    );
    const forgotten = ids.filter((_, i) => gone[i] === 1);
    if (forgotten.length > 0) await this.redis.zrem(index, ...forgotten);
    return forgotten.length;
  }

  /**
   * Trims the kept results of every user who made one in the last day (see trimKeptOf), within
   * the trim's bound of entries; forgets the users who made none since.
   */
  private async trimKept(): Promise<void> {
    const { keptCount } = this.retention;
    if (keptCount === undefined) return;
    const { keptOwners } = this.keys;
    const cutoff = Date.now() - OPEN_TTL_SECONDS * 1000;
    const idle = await this.redis.zrangebyscore(keptOwners, '-inf', `(${cutoff}`);
    // Their indexes hold entries of a day ago at most: emptied, Redis deletes them.
    await Promise.all(
      idle.map((owner) => this.redis.zremrangebyscore(this.keys.userKept(owner), '-inf', cutoff)),
    );
    if (idle.length > 0) await this.redis.zrem(keptOwners, ...idle);
    const owners = await this.redis.zrange(keptOwners, 0, -1);
    const sizes = await Promise.all(
      owners.map((owner) => this.redis.zcard(this.keys.userKept(owner))),
    );
    let budget = TRIM_MOST;
    for (const [i, owner] of owners.entries()) {
      if (sizes[i] <= keptCount || budget <= 0) continue;
      budget -= await this.trimKeptOf(owner, keptCount, Math.min(sizes[i] - keptCount, budget));
    }
  }

  /**
   * Forgets a user's finished queries with kept results past the newest `keptCount` of theirs,
   * with their results, whose bytes go back to the ledger (their idempotency keys stay their TTL:
   * a repeat is answered that the result is gone, never run again). Per user, so that nobody's
   * queries push out another's results. The index is by creation; a query past the count that
   * ended after the newest ones began is moved to its end instead, and looked at by a later trim:
   * a long query's result is as new as its end. Those still open stay where they are (admission
   * bounds how many). Returns how many entries it looked at (at most `excess`).
   */
  private async trimKeptOf(owner: string, keptCount: number, excess: number): Promise<number> {
    const index = this.keys.userKept(owner);
    await this.redis.zremrangebyscore(index, '-inf', Date.now() - OPEN_TTL_SECONDS * 1000);
    const [, bound] = await this.redis.zrevrange(index, keptCount - 1, keptCount - 1, 'WITHSCORES');
    if (bound === undefined) return 0;
    // The oldest first, by rank: open ones keep the lowest ranks, the next batch follows them.
    let open = 0;
    let seen = 0;
    while (seen < excess) {
      const last = open + Math.min(TRIM_BATCH, excess - seen) - 1;
      const ids = await this.redis.zrange(index, open, last);
      if (ids.length === 0) break;
      seen += ids.length;
      const left = await this.forgetKept(ids, bound, index);
      await Promise.all(left.gone.map((id) => this.ledger.release(id)));
      open += left.open;
    }
    return seen;
  }

  /**
   * Forgets or moves the kept results of `ids` (see FORGET_KEPT_FUNCTION): those gone, and how
   * many stay where they are, open.
   */
  private async forgetKept(
    ids: string[],
    bound: string,
    index: string,
  ): Promise<{ gone: string[]; open: number }> {
    const { queries } = this.keys;
    if (!isClusterClient(this.redis)) {
      const pairs = ids.flatMap((id) => [this.keys.meta(id), this.keys.out(id)]);
      const [gone, open] = (await this.scripts.forgetKeptMany(
        String(pairs.length + 2),
        queries,
        index,
        ...pairs,
        FINAL_LIST,
        bound,
        ...ids,
      )) as [string[], number];
      return { gone, open };
    }
    // Each query's keys in a hash slot of their own: a script each (auto-pipelined), then the indexes.
    const left = (await Promise.all(
      ids.map((id) =>
        this.scripts.forgetKept(this.keys.meta(id), this.keys.out(id), FINAL_LIST, bound),
      ),
    )) as number[];
    const gone = ids.filter((_, i) => left[i] < 0);
    const moved = ids.flatMap((id, i) => (left[i] > 0 ? [String(left[i]), id] : []));
    await Promise.all([
      gone.length > 0 && this.redis.zrem(queries, ...gone),
      gone.length > 0 && this.redis.zrem(index, ...gone),
      moved.length > 0 && this.redis.zadd(index, ...moved),
    ]);
    return { gone, open: left.filter((n) => n === 0).length };
  }
}
