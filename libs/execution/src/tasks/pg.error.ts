/** An error with a code: PostgreSQL's SQLSTATE, or a system error's (ECONNRESET and the like). */
export interface PgError {
  message: string;
  code?: string;
}

export function isPgError(err: unknown): err is PgError {
  return typeof err === 'object' && err !== null && typeof (err as PgError).code === 'string';
}
