import { QueryState } from '@app/contracts';
import {
  IdempotencyClaim,
  UserKey,
  IdempotencyKeys,
  KeyClaim,
  KeyLimits,
  Produced,
  QueryFacts,
  QueryRecord,
  QueryRecords,
  QueryRegistry,
  QuerySlots,
  UserQueries,
} from './query.registry';

/** What an adapter's records give the registry beside their port. */
export interface OwnedRecords extends QueryRecords {
  /** As create(); how many entries the owner's index of queries holds now, where that is known. */
  createIndexed(record: QueryRecord): Promise<number | undefined>;
  /** The queries of `owner`'s whose results are kept. */
  keptOf(owner: string): Promise<string[]>;
  /** Forgets every record of `owner`'s; returns the kept ones, whose results the caller drops. */
  forgetOwner(owner: string): Promise<string[]>;
}

/** What an adapter's slots give the registry beside their port. */
export interface OwnedSlots extends QuerySlots {
  /** The queries of `owner`'s whose slots are held now. */
  openOf(owner: string): Promise<string[]>;
  /** Drops every slot of `owner`'s; returns the queries that held one. */
  forgetOwner(owner: string): Promise<string[]>;
}

/** What an adapter's idempotency keys give the registry beside their port. */
export interface OwnedKeys extends IdempotencyKeys {
  /** Drops every claim of `owner`'s. */
  forgetOwner(owner: string): Promise<void>;
}

/** How an adapter keeps its records within their retention. */
export interface RecordTrim {
  /** Hears that `owner`'s index of queries holds `indexed` entries (a query was just added). */
  told(owner: string, indexed: number): void;
  /** Trims now. */
  trim(): Promise<void>;
  /** Trims on a timer of its own from now until close(). */
  start(): void;
  /** Stops the timer, and waits for a trim under way. */
  close(): Promise<void>;
}

/**
 * The query registry made of its concerns, each an adapter of the same kind (Redis, in-process):
 * each port's calls go to its concern; what takes several (a user's deletion, a user's open
 * queries and kept results, a query's creation told to the trim) is done here.
 */
export abstract class ComposedQueryRegistry implements QueryRegistry {
  protected constructor(
    readonly records: OwnedRecords,
    readonly slots: OwnedSlots,
    readonly idempotencyKeys: OwnedKeys,
    private readonly trimmer: RecordTrim,
  ) {}

  get slotLeaseMs(): number {
    return this.slots.slotLeaseMs;
  }

  /** The record, then the owner's index told to the trim (which trims it once past the count). */
  async create(record: QueryRecord): Promise<void> {
    const indexed = await this.records.createIndexed(record);
    if (indexed !== undefined) this.trimmer.told(record.owner, indexed);
  }

  discard(queryId: string, owner: string): Promise<void> {
    return this.records.discard(queryId, owner);
  }

  transition(
    queryId: string,
    to: QueryState,
    facts?: QueryFacts,
  ): Promise<QueryRecord | undefined> {
    return this.records.transition(queryId, to, facts);
  }

  move(queryId: string, to: QueryState, facts?: QueryFacts): Promise<void> {
    return this.records.move(queryId, to, facts);
  }

  progress(queryId: string, produced: Produced): Promise<void> {
    return this.records.progress(queryId, produced);
  }

  get(queryId: string): Promise<QueryRecord | undefined> {
    return this.records.get(queryId);
  }

  list(limit: number, owner?: string): Promise<QueryRecord[]> {
    return this.records.list(limit, owner);
  }

  keptOwners(): Promise<string[]> {
    return this.records.keptOwners();
  }

  admit(owner: string, queryId: string, cap: number): Promise<number | undefined> {
    return this.slots.admit(owner, queryId, cap);
  }

  renew(owner: string, queryId: string, leaseMs?: number): Promise<void> {
    return this.slots.renew(owner, queryId, leaseMs);
  }

  release(owner: string, queryId: string): Promise<void> {
    return this.slots.release(owner, queryId);
  }

  claimKey(userKey: UserKey, claim: IdempotencyClaim, limits: KeyLimits): Promise<KeyClaim> {
    return this.idempotencyKeys.claimKey(userKey, claim, limits);
  }

  releaseKey(userKey: UserKey): Promise<void> {
    return this.idempotencyKeys.releaseKey(userKey);
  }

  trim(): Promise<void> {
    return this.trimmer.trim();
  }

  startTrimming(): void {
    this.trimmer.start();
  }

  /**
   * Each concern forgets the owner's (not in one step where the records are in other hash slots
   * than the owner's keys). A query the user had in flight may still be recorded after; its
   * owner's id keeps it from a later user of the name.
   */
  async forgetUser(owner: string): Promise<UserQueries> {
    const [kept, open] = await Promise.all([
      this.records.forgetOwner(owner),
      this.slots.forgetOwner(owner),
      this.idempotencyKeys.forgetOwner(owner),
    ]);
    return { open, kept };
  }

  async queriesOf(owner: string): Promise<UserQueries> {
    const [open, kept] = await Promise.all([this.slots.openOf(owner), this.records.keptOf(owner)]);
    return { open, kept };
  }

  close(): Promise<void> {
    return this.trimmer.close();
  }
}
