import {
  Client,
  DatabaseError,
  type ClientConfig,
  type Pool,
  type QueryResult,
  type QueryResultRow,
} from 'pg';

/** SLUICE_PG_CONNECT_TIMEOUT_MS's default, for pools made without the setting (tests, tools). */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** One class per time limit, made once: a pool per login must not make a class of its own. */
const clientClasses = new Map<number, typeof Client>();

/**
 * pg's Client with a time limit on connecting, for a PostgreSQL that takes the connection and
 * never answers (a host gone behind a proxy, a full backlog). Given to a Pool as its `Client`, not
 * as the pool's own connectionTimeoutMillis: pg-pool would also end a wait for a client of a busy
 * pool, which may last as long as the statements ahead of it.
 */
export function connectingWithin(ms: number): typeof Client {
  let made = clientClasses.get(ms);
  if (!made) {
    made = class extends Client {
      constructor(config?: string | ClientConfig) {
        const given = typeof config === 'string' ? { connectionString: config } : config;
        super({ ...given, connectionTimeoutMillis: ms });
      }
    };
    clientClasses.set(ms, made);
  }
  return made;
}

/**
 * Whether `err` is pg's for a connect that passed its time limit (see connectingWithin). Never an
 * error PostgreSQL sent (those carry a SQLSTATE), whatever its message: a user may raise any.
 */
export function isConnectTimeout(err: unknown): boolean {
  return (
    err instanceof Error &&
    !(err instanceof DatabaseError) &&
    (err as { code?: unknown }).code === undefined &&
    (err.message === 'timeout expired' ||
      err.message === 'Connection terminated due to connection timeout')
  );
}

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
