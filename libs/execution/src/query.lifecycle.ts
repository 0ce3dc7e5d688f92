import { Logger } from '@nestjs/common';
import { FINAL_STATES, QueryState } from '@app/contracts';
import { QueryFacts, QueryRecord, QueryRecords, QuerySlots } from '@app/transport';

/** Tries to write a query's end to the registry before giving up (0.5 s, then 1 s apart). */
const END_ATTEMPTS = 3;
/** How long an end this process recorded waits to be asked for (by the request log). */
const ENDING_KEPT_MS = 10_000;
/** Most ends kept waiting to be asked for: the oldest go first. */
const ENDINGS_KEPT = 10_000;

/** The query a transition is about: its id, and whose slot it holds. */
export interface QueryRef {
  queryId: string;
  owner: string;
}

/**
 * The one writer of a query's state, in every process (api, worker, standalone): each path —
 * the worker starting and ending a job, the api streaming and ending a response, a cancel of a
 * queued query — moves the query through `transition`, which the registry applies only along
 * QUERY_TRANSITIONS. Ending a query also frees its owner's slot, and is told to whoever in this
 * process waits for it (`ended`), so nobody polls the registry for it.
 */
export class QueryLifecycle {
  private readonly logger = new Logger(QueryLifecycle.name);
  /** Ends recorded here, by query id, oldest first; each kept until asked for or stale. */
  private readonly endings = new Map<string, { at: number; record: QueryRecord | undefined }>();
  private readonly waiting = new Map<string, (record: QueryRecord | undefined) => void>();

  /**
   * `tellEnds`: this process asks for its ends (the api's request log does); a worker does not,
   * and keeps none.
   */
  constructor(
    /** Records and slots: a query's end frees its owner's slot. */
    private readonly registry: QueryRecords & QuerySlots,
    private readonly tellEnds = false,
  ) {}

  /** How long an owner's slot is held past its last renewal (ms). */
  get slotLeaseMs(): number {
    return this.registry.slotLeaseMs;
  }

  /** A new query: queued. */
  begin(record: QueryRecord): Promise<void> {
    return this.registry.create(record);
  }

  /**
   * Moves the query to `to`. A step on the way (running, streaming) that fails is logged and
   * left to the next one: the final state is what counts. The final state is retried through a
   * Redis blip, then its owner's slot freed; where ends are told, what the registry then holds
   * (whoever ended the query first) is told to `ended`. Never throws.
   */
  async transition(query: QueryRef, to: QueryState, facts: QueryFacts = {}): Promise<void> {
    if (!FINAL_STATES.includes(to)) {
      // Nobody looks at the record a step on the way leaves.
      await this.registry.transition(query.queryId, to, facts, false).catch((err: Error) => {
        this.logger.warn(`query ${query.queryId}: could not record it ${to}: ${err.message}`);
      });
      return;
    }
    // Unrecorded, it would show as running, and hold its owner's slot until the slot's lease
    // lapses (in-process: for good).
    // Both at once: they touch keys of different hash tags (no one script may), and neither
    // waits for the other.
    const [record] = await Promise.all([
      this.retried(query, 'record its final state', () =>
        // Read back only where ends are told (the api's request log); a worker does not look.
        this.registry.transition(query.queryId, to, facts, this.tellEnds),
      ),
      this.retried(query, "free its owner's slot", () =>
        this.registry.release(query.owner, query.queryId),
      ),
    ]);
    this.told(query.queryId, record);
  }

  /**
   * The query's end is in the registry already, recorded by its producer with the result's last
   * entry: what is left is to free its owner's slot and, where ends are told, to tell `record`
   * (the end as this process knows it: the same facts as the registry's). Never throws.
   */
  async endedWithResult(query: QueryRef, record?: QueryRecord): Promise<void> {
    await this.retried(query, "free its owner's slot", () =>
      this.registry.release(query.owner, query.queryId),
    );
    this.told(query.queryId, record);
  }

  /**
   * Keeps the owner's slot while the query lives (a lease where the registry is shared), for one
   * lease or `leaseMs` from now.
   */
  keepSlot(query: QueryRef, leaseMs?: number): Promise<void> {
    return this.registry.renew(query.owner, query.queryId, leaseMs);
  }

  /**
   * The record of a query as this process ended it, once it has (at once if it already did);
   * undefined after `waitMs`, or if the registry could not be read.
   */
  ended(queryId: string, waitMs: number): Promise<QueryRecord | undefined> {
    const ending = this.endings.get(queryId);
    if (ending) {
      this.endings.delete(queryId);
      return Promise.resolve(ending.record);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiting.delete(queryId);
        resolve(undefined);
      }, waitMs);
      this.waiting.set(queryId, (record) => {
        clearTimeout(timer);
        this.waiting.delete(queryId);
        resolve(record);
      });
    });
  }

  private told(queryId: string, record: QueryRecord | undefined): void {
    if (!this.tellEnds) return;
    const waiter = this.waiting.get(queryId);
    if (waiter) return waiter(record);
    const now = Date.now();
    // Ends nobody asks for (a cancel of another api's query) go once stale.
    for (const [id, { at }] of this.endings) {
      if (now - at < ENDING_KEPT_MS && this.endings.size < ENDINGS_KEPT) break;
      this.endings.delete(id);
    }
    this.endings.set(queryId, { at: now, record });
  }

  private async retried<T>(
    query: QueryRef,
    what: string,
    write: () => Promise<T>,
  ): Promise<T | undefined> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await write();
      } catch (err) {
        if (attempt === END_ATTEMPTS) {
          this.logger.error(`query ${query.queryId}: cannot ${what}: ${(err as Error).message}`);
          return undefined;
        }
        await new Promise((resolve) => setTimeout(resolve, attempt * 500));
      }
    }
  }
}
