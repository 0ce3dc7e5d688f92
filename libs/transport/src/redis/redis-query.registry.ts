import {
  IdempotencyClaim,
  KeyClaim,
  KeyLimits,
  Produced,
  QueryFacts,
  QueryRecord,
  QueryRegistry,
  RecordRetention,
  SLOT_LEASE_MS,
  UserQueries,
} from '../query.registry';
import { QueryState } from '@app/contracts';
import { RedisKeys } from '../redis.keys';
import type { RedisClient } from './redis.connector';
import { RedisIdempotencyKeys } from './redis-idempotency.keys';
import { RedisQueryRecords } from './redis-query.records';
import { RedisQuerySlots } from './redis-query.slots';
import { RedisRecordTrim } from './redis-record.trim';

/**
 * The query registry in Redis: its concerns, each an adapter of its own on one connection —
 * records, slots, idempotency keys and the retention trim — and what takes more than one of them
 * (a user's deletion, a user's open queries and kept results).
 */
export class RedisQueryRegistry implements QueryRegistry {
  readonly records: RedisQueryRecords;
  readonly slots: RedisQuerySlots;
  readonly idempotencyKeys: RedisIdempotencyKeys;
  private readonly trimmer: RedisRecordTrim;

  constructor(
    redis: RedisClient,
    keys: RedisKeys,
    retention: RecordRetention,
    slotLeaseMs = SLOT_LEASE_MS,
  ) {
    this.records = new RedisQueryRecords(redis, keys, retention.seconds);
    this.slots = new RedisQuerySlots(redis, keys, slotLeaseMs);
    this.idempotencyKeys = new RedisIdempotencyKeys(redis, keys);
    this.trimmer = new RedisRecordTrim(redis, keys, retention);
  }

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
    readBack?: boolean,
  ): Promise<QueryRecord | undefined> {
    return this.records.transition(queryId, to, facts, readBack);
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

  claimKey(
    owner: string,
    key: string,
    claim: IdempotencyClaim,
    limits: KeyLimits,
  ): Promise<KeyClaim> {
    return this.idempotencyKeys.claimKey(owner, key, claim, limits);
  }

  releaseKey(owner: string, key: string): Promise<void> {
    return this.idempotencyKeys.releaseKey(owner, key);
  }

  trim(): Promise<void> {
    return this.trimmer.trim();
  }

  startTrimming(): void {
    this.trimmer.start();
  }

  /**
   * Each concern forgets the owner's (not in one step: the records are in other hash slots than
   * the owner's keys). A query the user had in flight may still be recorded after; its owner's id
   * keeps it from a later user of the name.
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
    const [open, kept] = await Promise.all([
      this.slots.openOf(owner),
      this.records.keptOf(owner),
    ]);
    return { open, kept };
  }

  close(): Promise<void> {
    return this.trimmer.close();
  }
}
