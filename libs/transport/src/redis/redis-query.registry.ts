import { createHash } from 'node:crypto';
import type { ChainableCommander } from 'ioredis';
import { type RedisClient, isClusterClient } from './redis.connector';
import { FINAL_STATES, Lane, QueryState, Status, finalState, statesBefore } from '@app/contracts';
import {
  UserQueries,
  IdempotencyClaim,
  KeyClaim,
  KeyLimits,
  Produced,
  QueryFacts,
  QueryRecord,
  QueryRegistry,
  RecordRetention,
  SLOT_LEASE_MS,
  statementPreview,
} from '../query.registry';
import { RedisKeys } from '../redis.keys';
import { RedisKeptLedger } from './redis-kept.ledger';
import type { EndRecorder } from './redis-result.writer';

/**
 * Moves a query if its state is one it may move from (KEYS[1] = meta; ARGV = the states it may be
 * in, as `,a,b,`; the retention in seconds, 0 to keep the TTL; '1' to read the hash back, '0' not
 * to; field, value, …), and returns the hash as it is then (or nothing).
 */
const TRANSITION = `
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {} end
if string.find(ARGV[1], ',' .. state .. ',', 1, true) then
  redis.call('HSET', KEYS[1], unpack(ARGV, 4))
  if ARGV[2] ~= '0' then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
end
if ARGV[3] == '0' then return {} end
return redis.call('HGETALL', KEYS[1])`;

const TRANSITION_COMMAND = 'sluiceQueryTransition';

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
 * Records a running query's progress (KEYS[1] = meta; ARGV = rows, bytes produced, and when it
 * began streaming or ''): only while it runs, so that a late report never changes an ended query,
 * nor makes a record out of nothing.
 */
const PROGRESS = `
local state = redis.call('HGET', KEYS[1], 'state')
if state == 'running' or state == 'streaming' then
  redis.call('HSET', KEYS[1], 'rowsProduced', ARGV[1], 'bytesProduced', ARGV[2])
  if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'streamingAt', ARGV[3]) end
end`;

/**
 * Claims an idempotency key (KEYS[1] = the key's claim, KEYS[2] = its owner's live keys, scored by
 * expiry; ARGV = claim, TTL ms, now, most, key digest): answers `{'held', claim}` for a key claimed
 * already, `{'full', oldest expiry}` when the owner holds `most` live ones, else claims it. The set
 * lives as long as its newest claim.
 */
const CLAIM_KEY = `
local held = redis.call('GET', KEYS[1])
if held then return {'held', held} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  return {'full', redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(ARGV[3]) + tonumber(ARGV[2]), ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return {'claimed'}`;

/**
 * Adds a query to its owner's index (KEYS[1]; ARGV = creation ms, query id, TTL ms), which lives
 * as long as the owner's newest query may stay open, and returns how many entries it holds.
 */
const INDEX = `
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return redis.call('ZCARD', KEYS[1])`;

/** Writes a new query's hash with its TTL (KEYS[1] = meta; ARGV = TTL seconds, field, value, …). */
const CREATE = `
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('EXPIRE', KEYS[1], ARGV[1])`;

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

const FINAL_LIST = `,${FINAL_STATES.join(',')},`;

/**
 * How often the index of every user's queries and the kept results are trimmed, by whichever
 * process creates a query first after that, unless the retention says (trimEveryMs).
 */
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

/** A Lua script defined on a connection: called by EVALSHA, sent in full only when Redis lacks it. */
type Script = (key: string, ...args: string[]) => Promise<unknown>;

function defineScript(redis: RedisClient, name: string, lua: string, numberOfKeys = 1): Script {
  // 0: the caller gives the number of keys first (a script over a batch of them).
  redis.defineCommand(name, numberOfKeys > 0 ? { numberOfKeys, lua } : { lua });
  const commands = redis as unknown as Record<string, Script>;
  return (key, ...args) => commands[name](key, ...args);
}

/** Longest a query's record lives while it has not finished. */
const OPEN_TTL_SECONDS = 24 * 3600;

/**
 * The query registry in Redis: one hash per query (its keys share the query's hash tag), an
 * index of recent queries, and per-user sets of queued and running queries.
 */
export class RedisQueryRegistry implements QueryRegistry {
  private readonly scripts: Record<
    | 'create'
    | 'index'
    | 'transition'
    | 'admit'
    | 'renew'
    | 'progress'
    | 'forget'
    | 'forgetMany'
    | 'forgetKept'
    | 'forgetKeptMany'
    | 'claimKey',
    Script
  >;
  /** Where a kept result's bytes are counted: given back when the trim drops the result. */
  private readonly ledger: RedisKeptLedger;
  private trimmedAt = 0;
  private readonly trimEveryMs: number;
  private trimming: Promise<void> = Promise.resolve();
  /** Users whose index this process is trimming (see trimQueriesOf): one trim each at a time. */
  private readonly userTrims = new Map<string, Promise<void>>();
  /** Users whose index this process saw past the count since it last trimmed it. */
  private readonly pastCount = new Set<string>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly retention: RecordRetention,
    readonly slotLeaseMs = SLOT_LEASE_MS,
  ) {
    this.trimEveryMs = retention.trimEveryMs ?? TRIM_EVERY_MS;
    this.scripts = {
      forget: defineScript(redis, 'sluiceQueryForget', FORGET),
      forgetMany: defineScript(redis, 'sluiceQueryForgetMany', FORGET_MANY, 0),
      forgetKept: defineScript(redis, 'sluiceKeptForget', FORGET_KEPT, 2),
      forgetKeptMany: defineScript(redis, 'sluiceKeptForgetMany', FORGET_KEPT_MANY, 0),
      create: defineScript(redis, 'sluiceQueryCreate', CREATE),
      index: defineScript(redis, 'sluiceQueryIndex', INDEX),
      transition: defineScript(redis, TRANSITION_COMMAND, TRANSITION),
      admit: defineScript(redis, 'sluiceSlotAdmit', ADMIT),
      renew: defineScript(redis, 'sluiceSlotRenew', RENEW),
      progress: defineScript(redis, 'sluiceQueryProgress', PROGRESS),
      claimKey: defineScript(redis, 'sluiceKeyClaim', CLAIM_KEY, 2),
    };
    this.ledger = new RedisKeptLedger(redis, keys);
  }

  /**
   * The hash (with its TTL, in one script), its entry in the index of everyone's queries and in
   * its owner's — the owner's kept index for a kept result, and the owner's entry among those
   * who keep results: a command each, not one MULTI, since each is in another hash slot; sent in
   * one write on an auto-pipelined connection. An owner's index past the count is trimmed then.
   */
  async create(record: QueryRecord): Promise<void> {
    const { queryId, owner, createdAt } = record;
    const [, , indexed] = await Promise.all([
      this.scripts.create(
        this.keys.meta(queryId),
        String(OPEN_TTL_SECONDS),
        ...Object.entries(toHash(record)).flat(),
      ),
      this.redis.zadd(this.keys.queries, createdAt, queryId),
      record.kept
        ? this.redis.zadd(this.keys.userKept(owner), createdAt, queryId)
        : this.scripts.index(
            this.keys.userQueries(owner),
            String(createdAt),
            queryId,
            String(OPEN_TTL_SECONDS * 1000),
          ),
      record.kept && this.redis.zadd(this.keys.keptOwners, createdAt, owner),
    ]);
    const { count } = this.retention;
    if (!record.kept && (indexed as number) > count) {
      this.pastCount.add(owner);
      if ((indexed as number) > count + trimSlack(count)) this.trimUser(owner);
    }
    // Now and then, not on every query, and never in the way of one.
    if (Date.now() - this.trimmedAt > this.trimEveryMs) {
      this.trimmedAt = Date.now();
      this.trimming = this.trimming
        .then(() => this.trimOnce())
        .catch(() => {
          // Nothing is lost: the next trim does it, and every record lapses by its TTL meanwhile.
        });
    }
  }

  /** Trims now: the index of everyone's, the kept results, and the users seen past the count. */
  async trim(): Promise<void> {
    await this.close();
    await this.trimOnce(true);
    await Promise.all([...this.pastCount].map((owner) => this.trimQueriesOf(owner)));
  }

  /** Trims a user's index unless this process is at it already; never in the way of a query. */
  private trimUser(owner: string): void {
    if (this.userTrims.has(owner)) return;
    const trimmed = this.trimQueriesOf(owner)
      .catch(() => {
        // Nothing is lost: the owner's next query past the count tries again, and every record
        // lapses by its TTL meanwhile.
      })
      .finally(() => this.userTrims.delete(owner));
    this.userTrims.set(owner, trimmed);
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

  async discard(queryId: string, owner: string): Promise<void> {
    // Three hash slots: a command each, sent together by auto-pipelining. Its entry in the
    // owner's indexes must not take the place of a query (or of a kept result).
    await Promise.all([
      this.redis.unlink(this.keys.meta(queryId)),
      this.redis.zrem(this.keys.queries, queryId),
      this.redis.zrem(this.keys.userQueries(owner), queryId),
      this.redis.zrem(this.keys.userKept(owner), queryId),
    ]);
  }

  async transition(
    queryId: string,
    to: QueryState,
    facts: QueryFacts = {},
    readBack = true,
  ): Promise<QueryRecord | undefined> {
    const hash = (await this.scripts.transition(
      ...this.transitionArgs(queryId, to, facts, readBack),
    )) as string[];
    if (!readBack) return undefined;
    const record: Record<string, string> = {};
    for (let i = 0; i + 1 < hash.length; i += 2) record[hash[i]] = hash[i + 1];
    return fromHash(record);
  }

  /**
   * What records a query's end in the MULTI that writes its stream's last entry (whose key carries
   * the same hash tag), as transition() writes it, not read back: a producer's, so that the end is
   * recorded exactly when that entry is written. Make it before any such MULTI: ioredis gives a
   * MULTI the scripts its connection has when it is made, and this registry defines its own on
   * the connection when it is made.
   */
  endRecorder(queryId: string): EndRecorder {
    return (multi, end, produced) => {
      if (end.kind !== 'end' && end.kind !== 'error') return;
      this.endIn(multi, queryId, finalState(end.status), {
        status: end.status,
        startedAt: end.startedAt,
        streamingAt: end.kind === 'end' ? end.streamingAt : undefined,
        rows: produced.rows,
        bytes: produced.bytes,
        rowsProduced: produced.rows,
        bytesProduced: produced.bytes,
      });
    };
  }

  /** Adds a final transition to `multi`, which must be made on this registry's connection after it. */
  endIn(multi: ChainableCommander, queryId: string, to: QueryState, facts: QueryFacts): void {
    const commands = multi as unknown as Record<
      string,
      ((...args: string[]) => unknown) | undefined
    >;
    const transition = commands[TRANSITION_COMMAND];
    // ioredis copies a connection's scripts into a MULTI when the MULTI is made.
    if (!transition)
      throw new Error('the registry was made after this MULTI: its script is not in it');
    transition.call(multi, ...this.transitionArgs(queryId, to, facts, false));
  }

  private transitionArgs(
    queryId: string,
    to: QueryState,
    facts: QueryFacts,
    readBack: boolean,
  ): [string, ...string[]] {
    const final = FINAL_STATES.includes(to);
    const fields = toHash({ ...facts, state: to, finishedAt: final ? Date.now() : undefined });
    return [
      this.keys.meta(queryId),
      `,${statesBefore(to).join(',')},`,
      final ? String(this.retention.seconds || 1) : '0',
      readBack ? '1' : '0',
      ...Object.entries(fields).flat(),
    ];
  }

  async progress(queryId: string, produced: Produced): Promise<void> {
    await this.scripts.progress(
      this.keys.meta(queryId),
      String(produced.rows),
      String(produced.bytes),
      produced.streamingAt === undefined ? '' : String(produced.streamingAt),
    );
  }

  async get(queryId: string): Promise<QueryRecord | undefined> {
    return fromHash(await this.redis.hgetall(this.keys.meta(queryId)));
  }

  async list(limit: number, owner?: string): Promise<QueryRecord[]> {
    if (owner === undefined) return this.listed(this.keys.queries, limit, true);
    const [queries, kept] = await Promise.all([
      this.listed(this.keys.userQueries(owner), limit, true),
      // The kept index is trimKept's to tidy: it gives a gone result's bytes back as it does.
      this.listed(this.keys.userKept(owner), limit, false),
    ]);
    return [...queries, ...kept].sort((a, b) => b.createdAt - a.createdAt).slice(0, limit);
  }

  /** The records of the newest `limit` entries of `index`; drops the entries of those gone. */
  private async listed(index: string, limit: number, prune: boolean): Promise<QueryRecord[]> {
    const ids = await this.redis.zrevrange(index, 0, limit - 1);
    if (ids.length === 0) return [];
    // One command per query, not one pipeline: each query's hash is in a hash slot of its own,
    // and a Redis Cluster pipeline must stay in one (auto-pipelining still sends them together).
    // Every field but the whole statement: a list shows its preview.
    const replies = await Promise.all(
      ids.map((id) =>
        this.redis.hmget(this.keys.meta(id), ...HASH_FIELDS).then(
          (values) => [null, listedHash(values)] as const,
          (err: Error) => [err, undefined] as const,
        ),
      ),
    );
    const records: QueryRecord[] = [];
    const gone: string[] = [];
    replies.forEach(([err, hash], i) => {
      const record = err || !hash ? undefined : fromHash(hash);
      if (record) records.push(record);
      else gone.push(ids[i]);
    });
    if (prune && gone.length > 0) await this.redis.zrem(index, ...gone);
    return records;
  }

  async admit(owner: string, queryId: string, cap: number): Promise<number | undefined> {
    const now = Date.now();
    const before = (await this.scripts.admit(
      this.keys.userActive(owner),
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
      this.keys.userActive(owner),
      String(Date.now() + leaseMs),
      queryId,
      String(leaseMs),
    );
  }

  async release(owner: string, queryId: string): Promise<void> {
    await this.redis.zrem(this.keys.userActive(owner), queryId);
  }

  async claimKey(
    owner: string,
    key: string,
    claim: IdempotencyClaim,
    limits: KeyLimits,
  ): Promise<KeyClaim> {
    const digest = keyDigest(key);
    const now = Date.now();
    const [outcome, value] = (await this.scripts.claimKey(
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

  async releaseKey(owner: string, key: string): Promise<void> {
    const digest = keyDigest(key);
    await this.redis
      .multi()
      .del(this.keys.idempotency(owner, digest))
      .zrem(this.keys.idempotencyKeys(owner), digest)
      .exec();
  }

  /**
   * Reads the user's indexes, then drops them with every record they list and every idempotency
   * key: not in one step (the records are in other hash slots). A query the user had in flight
   * may still be recorded after; its owner's id keeps it from a later user of the name.
   */
  async forgetUser(owner: string): Promise<UserQueries> {
    const { keys } = this;
    const indexes = [
      keys.userQueries(owner),
      keys.userKept(owner),
      keys.userActive(owner),
      keys.idempotencyKeys(owner),
    ];
    const [queries, kept, open, digests] = await Promise.all(
      indexes.map((index) => this.redis.zrange(index, 0, -1)),
    );
    const ids = [...new Set([...queries, ...kept, ...open])];
    // Each record in a hash slot of its own: a command each (auto-pipelined); the user's keys
    // share the user's hash tag, so one UNLINK takes them all.
    await Promise.all([
      ...ids.map((id) => this.redis.unlink(keys.meta(id))),
      ids.length > 0 && this.redis.zrem(keys.queries, ...ids),
      this.redis.zrem(keys.keptOwners, owner),
      this.redis.unlink(...indexes, ...digests.map((digest) => keys.idempotency(owner, digest))),
    ]);
    return { open, kept };
  }

  async queriesOf(owner: string): Promise<UserQueries> {
    const [open, kept] = await Promise.all([
      this.redis.zrangebyscore(this.keys.userActive(owner), Date.now(), '+inf'),
      this.redis.zrange(this.keys.userKept(owner), 0, -1),
    ]);
    return { open, kept };
  }

  keptOwners(): Promise<string[]> {
    return this.redis.zrange(this.keys.keptOwners, 0, -1);
  }

  /** Waits for the trims under way: the connection is the caller's, and may be closed next. */
  async close(): Promise<void> {
    await Promise.all([this.trimming, ...this.userTrims.values()]);
  }
}

/** An idempotency key's text, hashed: any 255 characters make a key name of one length. */
function keyDigest(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/**
 * A record's hash fields: each of QueryRecord's, where `statement` holds its preview and
 * `wholeStatement` the statement as recorded when that is longer, so that a list reads the
 * preview alone and a short statement costs no field more.
 */
const HASH_FIELDS = [
  'queryId',
  'owner',
  'ownerId',
  'role',
  'state',
  'database',
  'format',
  'lane',
  'statement',
  'boundValues',
  'encoding',
  'kept',
  'createdAt',
  'startedAt',
  'streamingAt',
  'finishedAt',
  'rows',
  'bytes',
  'rowsProduced',
  'bytesProduced',
  'status',
  'traceId',
] as const satisfies readonly (keyof QueryRecord)[];

// Fails to compile when QueryRecord gains a field that HASH_FIELDS (so a list) does not read.
const everyField: Exclude<keyof QueryRecord, (typeof HASH_FIELDS)[number]> extends never
  ? true
  : never = true;
void everyField;

/** The hash a list reads (HMGET of HASH_FIELDS): every field but the whole statement. */
function listedHash(values: (string | null)[]): Record<string, string> {
  const hash: Record<string, string> = {};
  HASH_FIELDS.forEach((field, i) => {
    const value = values[i];
    if (value !== null && value !== undefined) hash[field] = value;
  });
  return hash;
}

function toHash(record: Partial<QueryRecord>): Record<string, string> {
  const hash: Record<string, string> = {};
  for (const [field, value] of Object.entries(record)) {
    if (value === undefined) continue;
    hash[field] = typeof value === 'object' ? JSON.stringify(value) : String(value);
  }
  const { statement } = record;
  if (statement !== undefined && statementPreview(statement) !== statement) {
    hash.statement = statementPreview(statement);
    hash.wholeStatement = statement;
  }
  return hash;
}

function fromHash(hash: Record<string, string>): QueryRecord | undefined {
  if (!hash.queryId) return undefined;
  const num = (v: string | undefined) => (v === undefined ? undefined : Number(v));
  return {
    queryId: hash.queryId,
    owner: hash.owner,
    ownerId: hash.ownerId,
    role: hash.role,
    state: hash.state as QueryState,
    database: hash.database,
    format: hash.format,
    lane: hash.lane as Lane | undefined,
    statement: hash.wholeStatement ?? hash.statement ?? '',
    boundValues: num(hash.boundValues),
    encoding: hash.encoding,
    kept: hash.kept === 'true' ? true : undefined,
    createdAt: Number(hash.createdAt),
    startedAt: num(hash.startedAt),
    streamingAt: num(hash.streamingAt),
    finishedAt: num(hash.finishedAt),
    rows: Number(hash.rows ?? 0),
    bytes: Number(hash.bytes ?? 0),
    rowsProduced: num(hash.rowsProduced),
    bytesProduced: num(hash.bytesProduced),
    status: hash.status ? (JSON.parse(hash.status) as Status) : undefined,
    traceId: hash.traceId,
  };
}
