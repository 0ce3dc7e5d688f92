import type { Pool, QueryResult, QueryResultRow } from 'pg';

/**
 * PostgreSQL ended the session on purpose and said so: terminated (pg_terminate_backend, a fast
 * shutdown) or idle past idle_session_timeout. Both are raised as FATAL errors through the
 * backend's usual error path, which sends what it had answered before ahead of them; so a
 * statement that saw no answer before this error is known not to have run. (A crash of another
 * backend ends sessions with a notice and a closed socket instead: not this.)
 */
export function isSessionEnded(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '57P01' || code === '57P05';
}

/**
 * `pool.query`, asked once more when the pooled connection it took turned out to have a session
 * PostgreSQL had ended while it sat idle (the pool learns of it only a moment later). For
 * statements that may run twice: catalog reads, a cancel that checks its target.
 */
export async function queryOnLiveSession<R extends QueryResultRow>(
  pool: Pool,
  text: string,
  values?: unknown[],
): Promise<QueryResult<R>> {
  try {
    return await pool.query<R>(text, values);
  } catch (err) {
    if (!isSessionEnded(err)) throw err;
    return pool.query<R>(text, values);
  }
}
