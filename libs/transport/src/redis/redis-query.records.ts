import type { OwnedRecords } from '../composed.registry';
import { FINAL_STATES, Lane, QueryState, Status, finalState, statesBefore } from '@app/contracts';
import { Produced, QueryFacts, QueryRecord, statementPreview } from '../query.registry';
import { RedisKeys } from '../redis.keys';
import { Script, luaScripts, scriptFile } from './lua.script';
import { type RedisClient, isClusterClient } from './redis.connector';
import type { EndRecorder } from './redis-result.writer';

/** The records' scripts. */
const SCRIPTS = {
  create: scriptFile('createRecord-1'),
  createIndexed: scriptFile('createIndexedRecord-3'),
  index: scriptFile('indexQuery-1'),
  transition: scriptFile('moveRecord-1'),
  progress: scriptFile('recordProgress-1'),
} as const;

/** Longest a query's record lives while it has not finished. */
export const OPEN_TTL_SECONDS = 24 * 3600;

/** The final states as the scripts look for them: `,a,b,`. */
export const FINAL_LIST = `,${FINAL_STATES.join(',')},`;

/**
 * Queries' records in Redis: one hash per query (its keys share the query's hash tag), an index
 * of everyone's recent queries, and each user's index of theirs (its kept results apart).
 */
export class RedisQueryRecords implements OwnedRecords {
  private readonly scripts: Record<keyof typeof SCRIPTS, Script>;
  /** Redis Cluster: each key of a record's in its own command (they are in other hash slots). */
  private readonly cluster: boolean;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    /** How long a finished query's record stays (SLUICE_JOB_RETENTION_SECONDS). */
    private readonly retentionSeconds: number,
  ) {
    this.scripts = luaScripts(redis, SCRIPTS);
    this.cluster = isClusterClient(redis);
  }

  /**
   * The hash (with its TTL, in one script), its entry in the index of everyone's queries and in
   * its owner's — the owner's kept index for a kept result, and the owner's entry among those
   * who keep results: in Redis Cluster a command each, not one MULTI, since each is in another
   * hash slot, sent in one write on an auto-pipelined connection; on one node, a query's in one
   * script (CREATE_INDEXED).
   */
  async create(record: QueryRecord): Promise<void> {
    await this.createIndexed(record);
  }

  /**
   * As create(); returns how many entries the owner's index of queries holds now (undefined for
   * a kept result, which is counted apart), for the trim.
   */
  async createIndexed(record: QueryRecord): Promise<number | undefined> {
    const { queryId, owner, createdAt } = record;
    // One node: one script instead of three commands (a kept result's indexes are others).
    if (!record.kept && !this.cluster) {
      return (await this.scripts.createIndexed(
        this.keys.meta(queryId),
        this.keys.queries,
        this.keys.userQueries(owner),
        String(OPEN_TTL_SECONDS),
        String(createdAt),
        queryId,
        String(OPEN_TTL_SECONDS * 1000),
        ...Object.entries(toHash(record)).flat(),
      )) as number;
    }
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
    return record.kept ? undefined : (indexed as number);
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
  ): Promise<QueryRecord | undefined> {
    const hash = (await this.scripts.transition(
      ...this.transitionArgs(queryId, to, facts, { readBack: true }),
    )) as string[];
    const record: Record<string, string> = {};
    for (let i = 0; i + 1 < hash.length; i += 2) record[hash[i]] = hash[i + 1];
    return fromHash(record);
  }

  async move(queryId: string, to: QueryState, facts: QueryFacts = {}): Promise<void> {
    await this.scripts.transition(...this.transitionArgs(queryId, to, facts, { readBack: false }));
  }

  /**
   * What records a query's end with its stream's last entry (whose key carries the same hash
   * tag), as transition() writes it, not read back: a producer's, so that the end is recorded
   * exactly when that entry is written (RedisResultWriter runs both in one script).
   */
  endRecorder(queryId: string): EndRecorder {
    return (end, produced) => {
      if (end.kind !== 'end' && end.kind !== 'error') return undefined;
      const args = this.transitionArgs(
        queryId,
        finalState(end.status),
        {
          status: end.status,
          startedAt: end.startedAt,
          streamingAt: end.kind === 'end' ? end.streamingAt : undefined,
          rows: produced.rows,
          bytes: produced.bytes,
          rowsProduced: produced.rows,
          bytesProduced: produced.bytes,
        },
        { readBack: false },
      );
      return { meta: args[0], args: args.slice(1) };
    };
  }

  private transitionArgs(
    queryId: string,
    to: QueryState,
    facts: QueryFacts,
    { readBack }: { readBack: boolean },
  ): [string, ...string[]] {
    const final = FINAL_STATES.includes(to);
    const args: [string, ...string[]] = [
      this.keys.meta(queryId),
      statesBeforeList(to),
      final ? String(this.retentionSeconds || 1) : '0',
      readBack ? '1' : '0',
    ];
    // Not a literal spread from facts with fields added: V8's slow path for such a literal.
    hashArgs(facts, args).push('state', to);
    if (final) args.push('finishedAt', String(Date.now()));
    return args;
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
    if (owner === undefined) return this.listed(this.keys.queries, limit, { prune: true });
    const [queries, kept] = await Promise.all([
      this.listed(this.keys.userQueries(owner), limit, { prune: true }),
      // The kept index is trimKept's to tidy: it gives a gone result's bytes back as it does.
      this.listed(this.keys.userKept(owner), limit, { prune: false }),
    ]);
    return [...queries, ...kept].sort((a, b) => b.createdAt - a.createdAt).slice(0, limit);
  }

  /** The records of the newest `limit` entries of `index`; drops the entries of those gone. */
  private async listed(
    index: string,
    limit: number,
    { prune }: { prune: boolean },
  ): Promise<QueryRecord[]> {
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

  keptOwners(): Promise<string[]> {
    return this.redis.zrange(this.keys.keptOwners, 0, -1);
  }

  /** The queries of `owner`'s whose results are kept (or were, until their records lapsed). */
  keptOf(owner: string): Promise<string[]> {
    return this.redis.zrange(this.keys.userKept(owner), 0, -1);
  }

  /**
   * Reads the owner's indexes, then drops them with every record they list: not in one step (the
   * records are in other hash slots). A query the owner had in flight may still be recorded
   * after; its owner's id keeps it from a later user of the name. Returns the kept ones, whose
   * results the caller drops.
   */
  async forgetOwner(owner: string): Promise<string[]> {
    const { keys } = this;
    const indexes = [keys.userQueries(owner), keys.userKept(owner)];
    const [queries, kept] = await Promise.all(
      indexes.map((index) => this.redis.zrange(index, 0, -1)),
    );
    const ids = [...new Set([...queries, ...kept])];
    // Each record in a hash slot of its own: a command each (auto-pipelined); the owner's indexes
    // share the owner's hash tag, so one UNLINK takes them both.
    await Promise.all([
      ...ids.map((id) => this.redis.unlink(keys.meta(id))),
      ids.length > 0 && this.redis.zrem(keys.queries, ...ids),
      this.redis.zrem(keys.keptOwners, owner),
      this.redis.unlink(...indexes),
    ]);
    return kept;
  }
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
  'spooled',
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

/** The states a query may move to `to` from, as the scripts look for them (`,a,b,`). */
const STATES_BEFORE = new Map<QueryState, string>();

function statesBeforeList(to: QueryState): string {
  let list = STATES_BEFORE.get(to);
  if (list === undefined) STATES_BEFORE.set(to, (list = `,${statesBefore(to).join(',')},`));
  return list;
}

/**
 * toHash's fields appended to `into` as HSET takes them (field, value, …): each query's end
 * writes them, and the entries and flat() between cost more than the rest of its move.
 */
function hashArgs<T extends string[]>(record: Partial<QueryRecord>, into: T): T {
  const { statement } = record;
  const preview = statement === undefined ? undefined : statementPreview(statement);
  for (const field of Object.keys(record) as (keyof QueryRecord)[]) {
    const value = record[field];
    if (value === undefined) continue;
    if (field === 'statement') into.push(field, preview!);
    else into.push(field, typeof value === 'object' ? JSON.stringify(value) : String(value));
  }
  if (statement !== undefined && preview !== statement) into.push('wholeStatement', statement);
  return into;
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
    spooled: hash.spooled === 'true' ? true : undefined,
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
