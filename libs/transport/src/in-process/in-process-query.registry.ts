import { FINAL_STATES, QUERY_TRANSITIONS, QueryState } from '@app/contracts';
import {
  ComposedQueryRegistry,
  OwnedKeys,
  OwnedRecords,
  OwnedSlots,
  RecordTrim,
} from '../composed.registry';
import {
  IdempotencyClaim,
  UserKey,
  KeyClaim,
  KeyLimits,
  Produced,
  QueryFacts,
  QueryRecord,
  RecordRetention,
  SLOT_LEASE_MS,
  statementPreview,
} from '../query.registry';

/** Standalone mode's query records, in memory: trimmed as they are read and written. */
export class InProcessQueryRecords implements OwnedRecords {
  private readonly records = new Map<string, QueryRecord>();
  /**
   * Each owner's finished queries by the time they ended, oldest first: each owner's go by count,
   * those with kept results apart from the others.
   */
  private readonly ended = new Map<string, Map<string, number>>();
  private readonly endedKept = new Map<string, Map<string, number>>();

  constructor(
    private readonly retention: RecordRetention,
    /** Drops the kept result of a query forgotten by `retention.keptCount`. */
    private readonly dropResult: (queryId: string) => void = () => undefined,
  ) {}

  create(record: QueryRecord): Promise<void> {
    this.records.set(record.queryId, { ...record });
    this.forgetOld();
    return Promise.resolve();
  }

  /** As create(): each owner's count is kept by forgetOld() as records come, not by a trim. */
  async createIndexed(record: QueryRecord): Promise<undefined> {
    await this.create(record);
    return undefined;
  }

  discard(queryId: string, _owner: string): Promise<void> {
    this.forget(queryId);
    return Promise.resolve();
  }

  transition(
    queryId: string,
    to: QueryState,
    facts?: QueryFacts,
  ): Promise<QueryRecord | undefined> {
    const record = this.moved(queryId, to, facts);
    return Promise.resolve(record && { ...record });
  }

  move(queryId: string, to: QueryState, facts?: QueryFacts): Promise<void> {
    this.moved(queryId, to, facts);
    return Promise.resolve();
  }

  /** Moves the record if QUERY_TRANSITIONS allows it; the record, moved or not. */
  private moved(queryId: string, to: QueryState, facts: QueryFacts = {}): QueryRecord | undefined {
    const record = this.records.get(queryId);
    if (record && QUERY_TRANSITIONS[record.state].includes(to)) {
      // A fact not known (undefined) leaves what the record holds, as in Redis.
      for (const [field, value] of Object.entries(facts)) {
        if (value !== undefined) Object.assign(record, { [field]: value });
      }
      record.state = to;
      if (FINAL_STATES.includes(to)) {
        record.finishedAt = Date.now();
        this.endedOf(record).set(queryId, record.finishedAt);
        this.forgetOld();
      }
    }
    return record;
  }

  progress(queryId: string, produced: Produced): Promise<void> {
    const record = this.records.get(queryId);
    if (record && !FINAL_STATES.includes(record.state)) {
      record.rowsProduced = produced.rows;
      record.bytesProduced = produced.bytes;
      if (produced.streamingAt !== undefined) record.streamingAt = produced.streamingAt;
    }
    return Promise.resolve();
  }

  get(queryId: string): Promise<QueryRecord | undefined> {
    this.forgetOld();
    const record = this.records.get(queryId);
    return Promise.resolve(record ? { ...record } : undefined);
  }

  list(limit: number, owner?: string): Promise<QueryRecord[]> {
    this.forgetOld();
    const all = [...this.records.values()]
      .filter((r) => owner === undefined || r.owner === owner)
      .sort((a, b) => b.createdAt - a.createdAt);
    return Promise.resolve(
      all.slice(0, limit).map((r) => ({ ...r, statement: statementPreview(r.statement) })),
    );
  }

  trim(): Promise<void> {
    this.forgetOld();
    return Promise.resolve();
  }

  /**
   * Forgets finished queries past the retention: by time, then by each owner's count — kept
   * results by their own count, with their results.
   */
  private forgetOld(): void {
    const { seconds, count, keptCount = Infinity } = this.retention;
    const lapsed = Date.now() - seconds * 1000;
    for (const [owners, most] of [
      [this.ended, count],
      [this.endedKept, keptCount],
    ] as const) {
      for (const ended of owners.values()) {
        for (const [queryId, finishedAt] of ended) {
          const past = ended.size > most;
          if (finishedAt > lapsed && !past) break;
          this.forget(queryId);
          // A lapsed result lapses by itself; one past the count goes with its record.
          if (past && owners === this.endedKept) this.dropResult(queryId);
        }
      }
    }
  }

  /** Where a finished query waits to be forgotten. */
  private endedOf(record: QueryRecord): Map<string, number> {
    const owners = record.kept ? this.endedKept : this.ended;
    let ended = owners.get(record.owner);
    if (!ended) {
      ended = new Map();
      owners.set(record.owner, ended);
    }
    return ended;
  }

  private forget(queryId: string): void {
    const record = this.records.get(queryId);
    this.records.delete(queryId);
    if (!record) return;
    const ended = this.endedOf(record);
    ended.delete(queryId);
    if (ended.size === 0) (record.kept ? this.endedKept : this.ended).delete(record.owner);
  }

  keptOwners(): Promise<string[]> {
    this.forgetOld();
    const owners = [...this.records.values()].filter((r) => r.kept).map((r) => r.owner);
    return Promise.resolve([...new Set(owners)]);
  }

  keptOf(owner: string): Promise<string[]> {
    return Promise.resolve(this.keptNow(owner));
  }

  forgetOwner(owner: string): Promise<string[]> {
    const kept = this.keptNow(owner);
    for (const record of [...this.records.values()]) {
      if (record.owner === owner) this.forget(record.queryId);
    }
    return Promise.resolve(kept);
  }

  private keptNow(owner: string): string[] {
    this.forgetOld();
    const kept = [...this.records.values()].filter((r) => r.owner === owner && r.kept);
    return kept.map((r) => r.queryId);
  }
}

/** Standalone mode's slots, in memory: released, never lapsed. */
export class InProcessQuerySlots implements OwnedSlots {
  /** The lease only paces renewals that do nothing here. */
  readonly slotLeaseMs = SLOT_LEASE_MS;
  private readonly active = new Map<string, Set<string>>();

  admit(owner: string, queryId: string, cap: number): Promise<number | undefined> {
    const set = this.active.get(owner) ?? new Set<string>();
    if (set.size >= cap) return Promise.resolve(undefined);
    const before = set.size;
    set.add(queryId);
    this.active.set(owner, set);
    return Promise.resolve(before);
  }

  /** Nothing to renew: one process, in memory, where a release cannot get lost. */
  renew(): Promise<void> {
    return Promise.resolve();
  }

  release(owner: string, queryId: string): Promise<void> {
    const set = this.active.get(owner);
    set?.delete(queryId);
    if (set?.size === 0) this.active.delete(owner);
    return Promise.resolve();
  }

  openOf(owner: string): Promise<string[]> {
    return Promise.resolve([...(this.active.get(owner) ?? [])]);
  }

  forgetOwner(owner: string): Promise<string[]> {
    const open = [...(this.active.get(owner) ?? [])];
    this.active.delete(owner);
    return Promise.resolve(open);
  }
}

/** Standalone mode's Idempotency-Key claims, in memory. */
export class InProcessIdempotencyKeys implements OwnedKeys {
  /** Each owner's idempotency keys' claims, by claim order: the TTL is one setting, so by expiry. */
  private readonly claims = new Map<
    string,
    Map<string, { claim: IdempotencyClaim; until: number }>
  >();

  claimKey(
    { owner, key }: UserKey,
    claim: IdempotencyClaim,
    limits: KeyLimits,
  ): Promise<KeyClaim> {
    const now = Date.now();
    const owned =
      this.claims.get(owner) ?? new Map<string, { claim: IdempotencyClaim; until: number }>();
    this.claims.set(owner, owned);
    // Lapsed claims go when new ones come: the map stays as large as the keys of one TTL.
    for (const [other, { until }] of owned) {
      if (until > now) break;
      owned.delete(other);
    }
    const held = owned.get(key);
    // The same query's claim again (as a Redis client may send it twice): its own, claimed.
    if (held?.claim.queryId === claim.queryId) return Promise.resolve({ outcome: 'claimed' });
    if (held) return Promise.resolve({ outcome: 'held', claim: held.claim });
    if (owned.size >= limits.most) {
      const [oldest] = owned.values();
      return Promise.resolve({ outcome: 'full', freeInMs: oldest.until - now });
    }
    owned.set(key, { claim, until: now + limits.ttlSeconds * 1000 });
    return Promise.resolve({ outcome: 'claimed' });
  }

  releaseKey({ owner, key }: UserKey): Promise<void> {
    const owned = this.claims.get(owner);
    owned?.delete(key);
    if (owned?.size === 0) this.claims.delete(owner);
    return Promise.resolve();
  }

  forgetOwner(owner: string): Promise<void> {
    this.claims.delete(owner);
    return Promise.resolve();
  }
}

/** Standalone mode's trim: records are trimmed as they are read and written. */
class InProcessRecordTrim implements RecordTrim {
  constructor(private readonly records: InProcessQueryRecords) {}

  told(): void {}

  trim(): Promise<void> {
    return this.records.trim();
  }

  /** Nothing to start. */
  start(): void {}

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** The query registry of standalone mode: one process knows everything. */
export class InProcessQueryRegistry extends ComposedQueryRegistry {
  constructor(
    retention: RecordRetention,
    /** Drops the kept result of a query forgotten by `retention.keptCount`. */
    dropResult: (queryId: string) => void = () => undefined,
  ) {
    const records = new InProcessQueryRecords(retention, dropResult);
    super(
      records,
      new InProcessQuerySlots(),
      new InProcessIdempotencyKeys(),
      new InProcessRecordTrim(records),
    );
  }
}
