import { QueryState, Status } from '@app/contracts';

/** What the registry keeps of a query; times in epoch ms. */
export interface QueryRecord {
  queryId: string;
  owner: string;
  state: QueryState;
  database?: string;
  format: string;
  statement: string;
  createdAt: number;
  startedAt?: number;
  finishedAt?: number;
  rows: number;
  bytes: number;
  status?: Status;
}

/** Shared knowledge of queries across every api and worker process. */
export interface QueryRegistry {
  create(record: QueryRecord): Promise<void>;
  /** Running, streaming and progress; ignored once the query has a final state. */
  update(
    queryId: string,
    changes: Partial<Pick<QueryRecord, 'state' | 'startedAt' | 'rows' | 'bytes'>>,
  ): Promise<void>;
  /** Sets the final state, unless another process already did. */
  finish(
    queryId: string,
    state: QueryState,
    status: Status,
    progress?: { rows: number; bytes: number },
  ): Promise<void>;
  get(queryId: string): Promise<QueryRecord | undefined>;
  /** Most recent first. */
  list(limit: number): Promise<QueryRecord[]>;
  /**
   * Counts a new query against its owner's queued-and-running cap: returns how many the owner
   * had before, or undefined (and does not count it) when the cap is reached. Where the count is
   * shared between processes (Redis), a slot is a lease: it lapses unless `renew` keeps it.
   */
  admit(owner: string, queryId: string, cap: number): Promise<number | undefined>;
  /** Keeps a query's slot while the query lives; does nothing once the slot is released. */
  renew(owner: string, queryId: string): Promise<void>;
  /** Stops counting a query against its owner. */
  release(owner: string, queryId: string): Promise<void>;
  close(): Promise<void>;
}
