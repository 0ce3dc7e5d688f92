import { FINAL_STATES, QueryState, Status } from '@app/contracts';
import { QueryRecord, QueryRegistry } from '../query.registry';

/** The query registry of standalone mode: one process knows everything. */
export class InProcessQueryRegistry implements QueryRegistry {
  private readonly records = new Map<string, QueryRecord>();
  private readonly active = new Map<string, Set<string>>();

  constructor(private readonly retentionSeconds: number) {}

  create(record: QueryRecord): Promise<void> {
    this.records.set(record.queryId, { ...record });
    return Promise.resolve();
  }

  update(queryId: string, changes: Partial<QueryRecord>): Promise<void> {
    const record = this.records.get(queryId);
    if (record && !FINAL_STATES.includes(record.state)) Object.assign(record, changes);
    return Promise.resolve();
  }

  finish(
    queryId: string,
    state: QueryState,
    status: Status,
    progress?: { rows: number; bytes: number },
  ): Promise<void> {
    const record = this.records.get(queryId);
    if (record && !FINAL_STATES.includes(record.state)) {
      Object.assign(record, { state, status, finishedAt: Date.now() }, progress ?? {});
      setTimeout(() => this.records.delete(queryId), this.retentionSeconds * 1000).unref();
    }
    return Promise.resolve();
  }

  get(queryId: string): Promise<QueryRecord | undefined> {
    const record = this.records.get(queryId);
    return Promise.resolve(record ? { ...record } : undefined);
  }

  list(limit: number): Promise<QueryRecord[]> {
    const all = [...this.records.values()].sort((a, b) => b.createdAt - a.createdAt);
    return Promise.resolve(all.slice(0, limit).map((r) => ({ ...r })));
  }

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

  close(): Promise<void> {
    return Promise.resolve();
  }
}
