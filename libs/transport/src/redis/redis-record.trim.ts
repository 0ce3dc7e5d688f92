import type { RecordTrim } from '../composed.registry';
import { RecordRetention } from '../query.registry';
import { RedisKeys } from '../redis.keys';
import { Script, luaScripts, scriptFile } from './lua.script';
import { type RedisClient, isClusterClient } from './redis.connector';
import { RedisKeptLedger } from './redis-kept.ledger';
import { FINAL_LIST, OPEN_TTL_SECONDS } from './redis-query.records';

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
      forget: scriptFile('forgetRecord-1'),
      forgetMany: scriptFile('forgetRecords'),
      forgetKept: scriptFile('forgetKeptResult-2'),
      forgetKeptMany: scriptFile('forgetKeptResults'),
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
    await this.trimOnce({ force: true });
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
  private async trimOnce({ force = false }: { force?: boolean } = {}): Promise<void> {
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
