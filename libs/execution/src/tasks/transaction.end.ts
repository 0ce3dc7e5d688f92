import type { Connection } from 'pg';

/**
 * The session's reset: everything a statement may have left on it (settings, role, temporary
 * tables, prepared statements, cursors, LISTENs, advisory locks). As a query of its own after the
 * COMMIT's, in the same write: DISCARD ALL refuses to run in a string with other statements (the
 * implicit transaction block such a string opens), not after one. One statement costs PostgreSQL
 * less than the nine it stands for in one string (bench/pg-message-cost.mjs).
 */
export const SESSION_RESET = 'DISCARD ALL';

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
 * `COMMIT` then `DISCARD ALL`, two queries sent in one write, which tells apart the two ways it
 * can fail: a COMMIT that fails (a deferred constraint) committed nothing, while a reset that
 * fails (a session setting the statement left, such as a 1 ms statement_timeout) leaves the data
 * committed and only the session unclean. The reset runs whether or not the COMMIT went through:
 * each query is its own exchange. A plain `client.query()` rejects the same way for both.
 *
 * Pg Submittables (the interface pg-cursor uses): this one takes the COMMIT's answers, and
 * `reset`, queued right after it (queue()), the reset's; pg's Client calls their handlers for
 * each message the backend sends while one of them is the active query.
 */
export class TransactionEnd {
  private readonly completed: string[] = [];
  /** Written ahead of its turn (sendNow): its turn in the client's queue writes nothing. */
  private sent = false;
  private error: Error | undefined;
  /** The reset's turn in the client's queue: it takes the answers to DISCARD ALL. */
  private readonly reset = new SessionResetTurn((failure) => this.settle(failure));
  readonly done: Promise<TransactionEndResult>;
  private resolve!: (result: TransactionEndResult) => void;

  /**
   * `ROLLBACK` for a read-only user's statement: it has nothing to keep, and PostgreSQL before 16
   * lets a read-only transaction write large objects (lo_put, lo_unlink, lo_from_bytea).
   */
  constructor(private readonly end: 'COMMIT' | 'ROLLBACK' = 'COMMIT') {
    this.done = new Promise((resolve) => (this.resolve = resolve));
  }

  /** Queues both turns on `client`, next to each other: nothing may come between them. */
  queue(client: { query(submittable: object): unknown }): void {
    void client.query(this);
    void client.query(this.reset);
  }

  submit(connection: Connection): void {
    if (!this.sent) this.write(connection);
  }

  /**
   * Writes it now, while the query before it still has the connection (in the same write as that
   * one's last messages); it must then be queued (queue()) next on the client, whose answers
   * come after that one's ReadyForQuery, in order.
   */
  sendNow(connection: Connection): void {
    this.write(connection);
  }

  private write(connection: Connection): void {
    this.sent = true;
    connection.query(this.end);
    connection.query(SESSION_RESET);
  }

  handleCommandComplete(msg: { text: string }): void {
    this.completed.push(msg.text);
  }

  handleError(err: Error): void {
    // The COMMIT failed: the backend sends ReadyForQuery, and the reset's turn comes next.
    this.error ??= err;
  }

  handleReadyForQuery(): void {}
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}

  private settle(resetFailure: Error | undefined): void {
    const committed = this.error === undefined && this.completed[0] === this.end;
    this.resolve({ committed, reset: resetFailure === undefined, error: this.error ?? resetFailure });
  }
}

/** The reset's turn in the client's queue (sent by its TransactionEnd): settles it. */
class SessionResetTurn {
  private settled = false;
  private failure: Error | undefined;

  constructor(private readonly onSettled: (failure: Error | undefined) => void) {}

  submit(): void {}

  handleError(err: Error): void {
    // pg's Client routes nothing more here after an error: the result is settled now.
    this.failure ??= err;
    this.settle();
  }

  handleReadyForQuery(): void {
    this.settle();
  }

  handleCommandComplete(): void {}
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}

  private settle(): void {
    if (this.settled) return;
    this.settled = true;
    this.onSettled(this.failure);
  }
}
