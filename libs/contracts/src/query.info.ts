import { Status } from './status';

/** Where a query is in its life. */
export type QueryState = 'queued' | 'running' | 'streaming' | 'succeeded' | 'failed' | 'cancelled';

export const FINAL_STATES: readonly QueryState[] = ['succeeded', 'failed', 'cancelled'];

/** What GET /v1/queries/{query_id} shows of a query. */
export interface QueryInfo {
  query_id: string;
  owner: string;
  state: QueryState;
  database: string | null;
  format: string;
  /** The statement's text with placeholders, first 200 characters (parameter values are never shown). */
  statement: string;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** Milliseconds since creation, or from creation to the end. */
  elapsed_ms: number;
  /** Queries ahead of this one while it is queued. */
  queue_position: number | null;
  rows: number;
  bytes: number;
  status: Status | null;
}
