import type { Connection } from 'pg';

/**
 * What DISCARD ALL does, as the statements PostgreSQL documents it to be equivalent to. DISCARD
 * ALL itself cannot follow COMMIT in one query string (it refuses to run in the implicit
 * transaction block such a string opens); these can, so the commit and the reset of everything a
 * statement may have left on the session (settings, role, temporary tables, prepared statements,
 * cursors, LISTENs, advisory locks) take one round trip instead of two.
 */
export const SESSION_RESET = [
  'CLOSE ALL',
  'SET SESSION AUTHORIZATION DEFAULT',
  'RESET ALL',
  'DEALLOCATE ALL',
  'UNLISTEN *',
  'SELECT pg_advisory_unlock_all()',
  'DISCARD PLANS',
  'DISCARD TEMP',
  'DISCARD SEQUENCES',
].join('; ');

/**
 * How a transaction's end went: whether it ended as asked (committed, or rolled back for a
 * read-only user), and whether the session was reset after.
 */
export interface TransactionEndResult {
  committed: boolean;
  /** The session is as new: nothing of the statement's is left on it. */
  reset: boolean;
  /** The first error, if any: before COMMIT's completion it is the commit's failure. */
  error?: Error;
}

/**
 * `COMMIT; <session reset>` sent as one query, which tells apart the two ways it can fail: a
 * COMMIT that fails (a deferred constraint) committed nothing, while a reset that fails after it
 * (a session setting the statement left, such as a 1 ms statement_timeout) leaves the data
 * committed and only the session unclean. A plain `client.query()` rejects the same way for both.
 *
 * A pg Submittable (the interface pg-cursor uses): pg's Client calls these handlers for each
 * message the backend sends while this query is the active one.
 */
export class TransactionEnd {
  private readonly completed: string[] = [];
  /** Written ahead of its turn (sendNow): its turn in the client's queue writes nothing. */
  private sent = false;
  private error: Error | undefined;
  readonly done: Promise<TransactionEndResult>;
  private resolve!: (result: TransactionEndResult) => void;

  /**
   * `ROLLBACK` for a read-only user's statement: it has nothing to keep, and PostgreSQL before 16
   * lets a read-only transaction write large objects (lo_put, lo_unlink, lo_from_bytea).
   */
  constructor(private readonly end: 'COMMIT' | 'ROLLBACK' = 'COMMIT') {
    this.done = new Promise((resolve) => (this.resolve = resolve));
  }

  submit(connection: Connection): void {
    if (!this.sent) connection.query(`${this.end}; ${SESSION_RESET}`);
  }

  /**
   * Writes it now, while the query before it still has the connection (in the same write as that
   * one's last messages); it must then be the next query queued on the client, whose answers
   * come after that one's ReadyForQuery, in order.
   */
  sendNow(connection: Connection): void {
    connection.query(`${this.end}; ${SESSION_RESET}`);
    this.sent = true;
  }

  handleCommandComplete(msg: { text: string }): void {
    this.completed.push(msg.text);
  }

  handleError(err: Error): void {
    // The backend skips the rest of the string and sends ReadyForQuery; pg's Client stops
    // routing messages here after an error, so the result is settled now.
    this.error ??= err;
    this.settle();
  }

  handleReadyForQuery(): void {
    this.settle();
  }

  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}

  private settle(): void {
    const committed = this.completed[0] === this.end;
    const reset = this.error === undefined && this.completed.length > 1;
    this.resolve({ committed, reset, error: this.error });
  }
}
