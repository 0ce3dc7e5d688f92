import { Logger } from '@nestjs/common';
import { FINAL_STATES, QueryState } from '@app/contracts';
import { QueryFacts, QueryRecord, QueryRecords, QuerySlots } from '@app/transport';

/** Tries to write a query's end to the registry before giving up (0.5 s, then 1 s apart). */
const END_ATTEMPTS = 3;

/** Hears a query's end as the registry holds it after this process recorded it. */
export type EndListener = (queryId: string, record: QueryRecord | undefined) => void;

/** The query a transition is about: its id, and whose slot it holds. */
export interface QueryRef {
  queryId: string;
  owner: string;
}

/**
 * The one writer of a query's state, in every process (api, worker, standalone): each path —
 * the worker starting and ending a job, the api streaming and ending a response, a cancel of a
 * queued query — moves the query through `transition`, which the registry applies only along
 * QUERY_TRANSITIONS. Ending a query also frees its owner's slot, and is told to this process's
 * listeners (onEnd: the api's request log), so nobody polls the registry for it.
 *
 * Who else writes a query's record, and why that is safe: the worker's thread records the end
 * of a result it streams with the result's last entry (RedisQueryRecords.endRecorder: the same
 * transition, in the script that appends the entry), and reports progress (rows and bytes made, never the state);
 * the retention trim and a user's deletion forget records. Every state change goes through the
 * registry's transition, which refuses any move QUERY_TRANSITIONS does not allow, so of two
 * writers the first final state wins whoever writes it.
 */
export class QueryLifecycle {
  private readonly logger = new Logger(QueryLifecycle.name);
  private readonly listeners = new Set<EndListener>();

  constructor(
    /** Records and slots: a query's end frees its owner's slot. */
    private readonly registry: QueryRecords & QuerySlots,
  ) {}

  /**
   * Tells `listener` of every end this process records, as the registry then holds it (read back
   * for it: a process nobody listens in, a worker, spares the read). Returns how to stop.
   */
  onEnd(listener: EndListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

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
      await this.registry.move(query.queryId, to, facts).catch((err: Error) => {
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
        // Read back only where someone listens (the api's request log); a worker does not look.
        this.listeners.size > 0
          ? this.registry.transition(query.queryId, to, facts)
          : this.registry.move(query.queryId, to, facts).then(() => undefined),
      ),
      this.retried(query, "free its owner's slot", () =>
        this.registry.release(query.owner, query.queryId),
      ),
    ]);
    this.told(query.queryId, record);
  }

  /**
   * The query's end is in the registry already, recorded by its producer with the result's last
   * entry: what is left is to free its owner's slot and to tell the listeners `record`
   * (the end as this process knows it: the same facts as the registry's). Never throws.
   */
  async endedWithResult(query: QueryRef, record?: QueryRecord): Promise<void> {
    await this.retried(query, "free its owner's slot", () =>
      this.registry.release(query.owner, query.queryId),
    );
    this.told(query.queryId, record);
  }

  /**
   * Takes back a query admitted but never queued (refused after admission, or the repeat of an
   * Idempotency-Key's): its owner's slot and its record go; it never was a query. Throws what
   * the registry threw: the caller says why it is safe to leave (the slot lapses with its lease,
   * the record with its TTL).
   */
  async withdraw(query: QueryRef): Promise<void> {
    await Promise.all([
      this.registry.release(query.owner, query.queryId),
      this.registry.discard(query.queryId, query.owner),
    ]);
  }

  /**
   * Keeps the owner's slot while the query lives (a lease where the registry is shared), for one
   * lease or `leaseMs` from now.
   */
  keepSlot(query: QueryRef, leaseMs?: number): Promise<void> {
    return this.registry.renew(query.owner, query.queryId, leaseMs);
  }

  private told(queryId: string, record: QueryRecord | undefined): void {
    for (const listener of this.listeners) listener(queryId, record);
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
