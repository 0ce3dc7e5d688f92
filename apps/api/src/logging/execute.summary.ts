import { Lane, QueryState } from '@app/contracts';

/** How an execute request ended: its query's final state, or refused before it was queued. */
/** `accepted`: answered 202 before its result, which is fetched later. */
export type ExecuteOutcome =
  Extract<QueryState, 'succeeded' | 'failed' | 'cancelled'> | 'rejected' | 'accepted';

/** What the request log and the metrics keep of one execute request. */
export interface ExecuteSummary {
  queryId?: string;
  user?: string;
  database?: string;
  format?: string;
  lane?: Lane;
  outcome: ExecuteOutcome;
  httpStatus: number;
  /** Final status of the query, or of the refusal. */
  sqlState?: string;
  vendorCode?: number;
  rows: number;
  bytes: number;
  /** The whole HTTP request, as the client saw it. */
  durationMs: number;
  /** From queued to started, and from started to the final status, when the query ran. */
  queueWaitMs?: number;
  runMs?: number;
}
