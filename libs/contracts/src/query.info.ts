import { ERROR_CATALOGUE } from './error.catalogue';
import { Lane } from './execute.job';
import { Status } from './status';

/** Where a query is in its life. */
export type QueryState = 'queued' | 'running' | 'streaming' | 'succeeded' | 'failed' | 'cancelled';

export const FINAL_STATES: readonly QueryState[] = ['succeeded', 'failed', 'cancelled'];

/**
 * Where a query may go from each state: queued → running → streaming → a final state, any step
 * may be skipped (a short query is never shown streaming), and a final state is final — of two
 * processes ending one query, the first wins. Streaming to streaming carries progress.
 */
export const QUERY_TRANSITIONS: Readonly<Record<QueryState, readonly QueryState[]>> = {
  queued: ['running', 'streaming', ...FINAL_STATES],
  running: ['streaming', ...FINAL_STATES],
  streaming: ['streaming', ...FINAL_STATES],
  succeeded: [],
  failed: [],
  cancelled: [],
};

/** The states a query may be in to move to `to`. */
export function statesBefore(to: QueryState): QueryState[] {
  return (Object.keys(QUERY_TRANSITIONS) as QueryState[]).filter((from) =>
    QUERY_TRANSITIONS[from].includes(to),
  );
}

/** The final state a status stands for. */
export function finalState(status: Status): QueryState {
  if (status.vendor_code === 0) return 'succeeded';
  if (status.vendor_code === ERROR_CATALOGUE.CANCELLED.vendorCode) return 'cancelled';
  return 'failed';
}

/** What GET /v1/queries/{query_id} shows of a query. */
export interface QueryInfo {
  query_id: string;
  owner: string;
  state: QueryState;
  database: string | null;
  format: string;
  /** The queue the query waits (or waited) in. */
  lane: Lane;
  /**
   * The statement's text with placeholders (parameter values are never shown): as its record
   * holds it (up to SLUICE_RECORD_STATEMENT_BYTES) for one query, its first 200 characters in a
   * list.
   */
  statement: string;
  created_at: string;
  started_at: string | null;
  /** When its first rows came back from PostgreSQL and began to stream (null: not yet, or never). */
  streaming_at: string | null;
  finished_at: string | null;
  /** Milliseconds since creation, or from creation to the end. */
  elapsed_ms: number;
  /** Queries ahead of this one while it is queued. */
  queue_position: number | null;
  /** Rows and body bytes sent to a client so far. */
  rows: number;
  bytes: number;
  /** Rows and body bytes the worker has produced so far (updated about once a second while it runs). */
  rows_produced: number;
  bytes_produced: number;
  status: Status | null;
  /** Where its kept result is fetched (a query sent with wait_timeout); null: nothing kept. */
  result_url: string | null;
  /** Until when its kept result stays, once the query ended (SLUICE_RESULT_TTL_SECONDS). */
  result_kept_until: string | null;
  /** Where its kept result's body is: `spool` (SLUICE_SPOOL_URL) or `redis`; null: nothing kept. */
  result_kept_in: 'spool' | 'redis' | null;
  /** Its OpenTelemetry trace's id, when tracing is on and the request was sampled. */
  trace_id: string | null;
}
