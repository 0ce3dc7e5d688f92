import { ComposedQueryRegistry } from '../composed.registry';
import { RecordRetention, SLOT_LEASE_MS } from '../query.registry';
import { RedisKeys } from '../redis.keys';
import type { RedisClient } from './redis.connector';
import { RedisIdempotencyKeys } from './redis-idempotency.keys';
import { RedisQueryRecords } from './redis-query.records';
import { RedisQuerySlots } from './redis-query.slots';
import { RedisRecordTrim } from './redis-record.trim';

/**
 * The query registry in Redis: its concerns, each an adapter of its own on one connection —
 * records, slots, idempotency keys and the retention trim (ComposedQueryRegistry).
 */
export class RedisQueryRegistry extends ComposedQueryRegistry {
  declare readonly records: RedisQueryRecords;

  constructor(
    redis: RedisClient,
    keys: RedisKeys,
    retention: RecordRetention,
    slotLeaseMs = SLOT_LEASE_MS,
  ) {
    super(
      new RedisQueryRecords(redis, keys, retention.seconds),
      new RedisQuerySlots(redis, keys, slotLeaseMs),
      new RedisIdempotencyKeys(redis, keys),
      new RedisRecordTrim(redis, keys, retention),
    );
  }
}
