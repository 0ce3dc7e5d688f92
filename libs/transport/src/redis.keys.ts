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
   * waiting for records; a few entries, expiring. In Redis Cluster each hash slot the reader
   * groups streams by will need a wake key of its own in that slot.
   */
  wake(readerId: string): string {
    return `${this.prefix}:mux:{${readerId}}:wake`;
  }

  /** Index of recent queries (sorted set: query id by creation time). */
  get queries(): string {
    return `${this.prefix}:queries`;
  }

  /** Queued and running queries of one user (sorted set: query id by admission time). */
  userActive(username: string): string {
    return `${this.prefix}:user:{${username}}:active`;
  }

  /** An idempotency key of one user's (a string: the claim as JSON); the key text is hashed. */
  idempotency(username: string, keyDigest: string): string {
    return `${this.prefix}:user:{${username}}:idem:${keyDigest}`;
  }

  /** Heartbeats of worker processes (a hash of worker id → last beat, ms). */
  get workers(): string {
    return `${this.prefix}:workers`;
  }
}
