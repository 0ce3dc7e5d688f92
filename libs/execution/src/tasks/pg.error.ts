/** An error with a code: PostgreSQL's SQLSTATE, or a system error's (ECONNRESET and the like). */
export interface PgError {
  message: string;
  code?: string;
}

export function isPgError(err: unknown): err is PgError {
  return typeof err === 'object' && err !== null && typeof (err as PgError).code === 'string';
}

/**
 * PostgreSQL ended the session on purpose and said so: terminated (pg_terminate_backend, a fast
 * shutdown) or idle past idle_session_timeout. Both are raised as FATAL errors through the
 * backend's usual error path, which sends what it had answered before ahead of them; so a
 * statement that saw no answer before this error is known not to have run. (A crash of another
 * backend ends sessions with a notice and a closed socket instead: not this.)
 */
export function isSessionEnded(err: unknown): boolean {
  if (!isPgError(err)) return false;
  return err.code === '57P01' || err.code === '57P05';
}
