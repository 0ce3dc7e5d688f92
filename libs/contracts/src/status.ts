/** The spec's status object; `reason` text, PostgreSQL SQLSTATE, and our vendor code (0 on success). */
export interface Status {
  reason: string;
  sql_state: string;
  vendor_code: number;
  /** Rows returned, on the final status of a successful execution. */
  row_count?: number;
  /** Present and true when `max_rows` cut the result short. */
  truncated?: boolean;
}

/** The one error envelope every failure is written in. */
export interface ErrorEnvelope {
  query_id?: string;
  status: Status;
}

export const OK_SQL_STATE = '00000';

/** A status that ends an execution in failure (vendor code not 0). */
export function isFailure(status: Status): boolean {
  return status.vendor_code !== 0;
}

export function okStatus(reason = 'OK', extra: Partial<Status> = {}): Status {
  return { reason, sql_state: OK_SQL_STATE, vendor_code: 0, ...extra };
}
