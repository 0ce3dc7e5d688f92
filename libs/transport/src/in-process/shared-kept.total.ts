import { KeptBudget, KeptCaps } from '../capped-result.writer';

/**
 * The bytes all kept results of one process hold (standalone mode), in memory shared by the
 * threads that write them and the channel that holds them: a writer takes bytes here before it
 * posts a record, so that it learns at once, as a Redis writer does, that a record would pass the
 * cap; the channel, which holds the records, gives their bytes back when it drops them (expiry,
 * DELETE, failure).
 */
export class SharedKeptTotal {
  private readonly total: BigInt64Array;

  constructor(
    /** One BigInt64 (SharedKeptTotal.buffer()); the same memory in every thread. */
    readonly memory: SharedArrayBuffer,
  ) {
    this.total = new BigInt64Array(memory);
  }

  static buffer(): SharedArrayBuffer {
    return new SharedArrayBuffer(BigInt64Array.BYTES_PER_ELEMENT);
  }

  get bytes(): number {
    return Number(Atomics.load(this.total, 0));
  }

  /** Adds `bytes` unless the total would pass `cap`; false (nothing added) then. */
  take(bytes: number, cap: number): boolean {
    const add = BigInt(bytes);
    for (;;) {
      const now = Atomics.load(this.total, 0);
      if (add > 0n && now + add > BigInt(cap)) return false;
      if (Atomics.compareExchange(this.total, 0, now, now + add) === now) return true;
    }
  }

  give(bytes: number): void {
    if (bytes > 0) Atomics.sub(this.total, 0, BigInt(bytes));
  }

  /**
   * A writer's budget, when this is the total of all kept results: takes from `owner`'s total (the
   * bytes one user's kept results hold) and from this one; gives nothing back itself (the channel
   * does, as it drops).
   */
  budget(caps: KeptCaps, owner: SharedKeptTotal): KeptBudget {
    return {
      take: (bytes) => {
        if (!owner.take(bytes, caps.user)) return Promise.resolve('kept-user-full');
        if (this.take(bytes, caps.total)) return Promise.resolve(undefined);
        owner.give(bytes);
        return Promise.resolve('kept-full');
      },
      release: () => Promise.resolve(),
    };
  }
}
