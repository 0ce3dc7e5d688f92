/** An error with a code: PostgreSQL's SQLSTATE, or a system error's (ECONNRESET and the like). */
export interface PgError {
  message: string;
  code?: string;
}

export function isPgError(err: unknown): err is PgError {
  return typeof err === 'object' && err !== null && typeof (err as PgError).code === 'string';
}

/**
 * PostgreSQL ended the session on purpose and said so — terminated by an administrator
 * (pg_terminate_backend), after another backend crashed, or idle past idle_session_timeout. The
 * backend sends this error after everything it had answered before, so a statement that saw no
 * answer before it is known not to have run.
 */
export function isSessionEnded(err: unknown): boolean {
  if (!isPgError(err)) return false;
  return err.code === '57P01' || err.code === '57P02' || err.code === '57P05';
}
