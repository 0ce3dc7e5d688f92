/**
 * Builds every Redis key Sluice uses. All share the configured prefix; the keys of one query share a
 * hash tag so that they land in one Redis Cluster slot, and BullMQ's prefix carries its own tag.
 */
export class RedisKeys {
  constructor(readonly prefix: string) {}

  /** BullMQ prefix: every queue key of this deployment in one cluster slot. */
  get bullPrefix(): string {
    return `{${this.prefix}}`;
  }

  /** The stream of encoded result records of one query. */
  out(queryId: string): string {
    return `${this.prefix}:q:{${queryId}}:out`;
  }

  /** Set by a consumer to ask the producer to stop. */
  cancel(queryId: string): string {
    return `${this.prefix}:q:{${queryId}}:cancel`;
  }

  /** What is known of one query (hash): owner, state, timings, rows and bytes. */
  meta(queryId: string): string {
    return `${this.prefix}:q:{${queryId}}:meta`;
  }

  /** Kept alive by the api that reads a query; gone means nobody will read its result. */
  alive(queryId: string): string {
    return `${this.prefix}:q:{${queryId}}:alive`;
  }

  /**
   * Wakes one api's stream reader (RedisStreamMux) out of its blocking XREAD when a query starts
   * waiting for records; a few entries, expiring. In Redis Cluster the reader reads each hash
   * slot apart, and each slot's XREAD has a wake key of its own in that slot: `slotTag` is the
   * hash tag of a stream the XREAD reads.
   */
  wake(readerId: string, slotTag?: string): string {
    if (slotTag === undefined) return `${this.prefix}:mux:{${readerId}}:wake`;
    return `${this.prefix}:mux:{${slotTag}}:wake:${readerId}`;
  }

  /** Index of recent queries of every user (sorted set: query id by creation time), capped. */
  get queries(): string {
    return `${this.prefix}:queries`;
  }

  /** Users with kept results (sorted set: user name by the creation of their newest such query). */
  get keptOwners(): string {
    return `${this.prefix}:queries:kept-owners`;
  }

  /** Held by the process trimming the index, for one interval: one trims at a time. */
  get queriesTrimLock(): string {
    return `${this.prefix}:queries:trim-lock`;
  }

  /**
   * One user's slots: the queries that hold one, queued or running (sorted set: query id by the
   * deadline of its lease). The key keeps its first name, `active`, so that a deployment upgraded
   * in place keeps counting the slots its users hold.
   */
  userSlots(username: string): string {
    return `${this.prefix}:user:{${username}}:active`;
  }

  /**
   * A user's recent queries whose results are not kept (sorted set: query id by creation time):
   * the records each user keeps are counted here, apart from everyone else's.
   */
  userQueries(username: string): string {
    return `${this.prefix}:user:{${username}}:queries`;
  }

  /** A user's recent queries whose results are kept (sorted set: query id by creation time). */
  userKept(username: string): string {
    return `${this.prefix}:user:{${username}}:kept`;
  }

  /** An idempotency key of one user's (a string: the claim as JSON); the key text is hashed. */
  idempotency(username: string, keyDigest: string): string {
    return `${this.prefix}:user:{${username}}:idem:${keyDigest}`;
  }

  /** One user's live idempotency keys (sorted set: key digest by the claim's expiry), counted. */
  idempotencyKeys(username: string): string {
    return `${this.prefix}:user:{${username}}:idem-keys`;
  }

  /**
   * Bytes all kept results hold together (a counter). It and the four keys below share one hash
   * tag of their own: the ledger's scripts touch them together, never a query's keys.
   */
  get keptTotal(): string {
    return `${this.prefix}:kept:{kept}:total`;
  }

  /** Bytes each kept result holds (hash: query id → bytes). */
  get keptHeld(): string {
    return `${this.prefix}:kept:{kept}:held`;
  }

  /** When each kept result's stream expires (sorted set: query id by epoch ms). */
  get keptExpiry(): string {
    return `${this.prefix}:kept:{kept}:expiry`;
  }

  /** Bytes each user's kept results hold together (hash: user name → bytes). */
  get keptByUser(): string {
    return `${this.prefix}:kept:{kept}:users`;
  }

  /** Whose each kept result is (hash: query id → user name), while it holds bytes. */
  get keptOwner(): string {
    return `${this.prefix}:kept:{kept}:owner`;
  }

  /** Heartbeats of worker processes (a hash of worker id → last beat, ms). */
  get workers(): string {
    return `${this.prefix}:workers`;
  }
}
