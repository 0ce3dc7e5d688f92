import type { Connection, PoolClient } from 'pg';
import type { TextRow } from '@app/formats';
import { ProducerStoppedError, ResultWriter, StopReason } from '@app/transport';
import { DatabaseHandle } from './database.registry';
import { isPgError } from './pg.error';
import { StatementStop } from './statement.stop';
import { TextCursor } from './text.cursor';
import { TransactionEnd } from './transaction.end';

/** The socket under a pg client: corked so that the messages of one step go in one write. */
function socketOf(client: PoolClient): { cork(): void; uncork(): void } | undefined {
  return (client as unknown as { connection?: { stream?: { cork(): void; uncork(): void } } })
    .connection?.stream;
}

/**
 * One statement's hold on PostgreSQL, from its connection to the connection's return: the pooled
 * client, the transaction, the cursor, the read in flight, and the StatementStop through which a
 * cancel, the client's loss and the time limit all end it. A stop cancels the statement where
 * PostgreSQL runs it; the writer, interrupted, fails a write waiting for the client.
 *
 * Its life: start → read… → commit, or, on any failure, abandon; then always release, the one
 * place the connection goes back to its pool (or is dropped) and the watching ends. A short
 * statement takes two round trips: the cursor's prelude (BEGIN, SET LOCALs) with its first read,
 * then the portal's close with the commit and the session's reset (see commitWithClose).
 */
export class StatementLife {
  private readonly stop: StatementStop;
  private client: PoolClient | undefined;
  private cursor: TextCursor | undefined;
  /** The read PostgreSQL is answering: the statement runs there while this is set. */
  private reading: Promise<TextRow[]> | undefined;
  private inTransaction = false;
  /** The session was reset with the commit: release() need not reset it again. */
  private reset = false;
  /** The connection may be out of step with the server: dropped, not pooled. */
  private broken = false;
  /** The COMMIT and reset, sent with the portal's close when the statement completed. */
  private ending: TransactionEnd | undefined;
  /** Reads asked for so far, the first one included. */
  private reads = 0;

  constructor(
    private readonly db: DatabaseHandle,
    /** What a cancel checks before it signals (see applicationNameOf). */
    private readonly applicationName: string,
    writer: ResultWriter,
    timeoutMs: number | undefined,
  ) {
    this.stop = new StatementStop(writer, timeoutMs, () => {
      if (this.reading) void this.cancel();
    });
  }

  /** The first reason to stop, if any came. */
  get stopReason(): StopReason | undefined {
    return this.stop.reason;
  }

  /**
   * Takes the connection and opens `cursor` on it (its prelude begins the transaction), asking
   * for the first `rows` at once: prelude, statement and first read leave in one write.
   */
  start(client: PoolClient, cursor: TextCursor, rows: number): Promise<TextRow[]> {
    this.client = client;
    this.inTransaction = true;
    cursor.onComplete = () => this.commitWithClose(client, cursor);
    return this.corked(() => {
      this.cursor = client.query(cursor);
      return this.read(rows);
    });
  }

  /**
   * The start failed before PostgreSQL reached the statement (its session had ended while the
   * connection sat in the pool): the connection is dropped, and start may be called again with
   * another. The time limit and the watching for a stop go on across both.
   */
  discardStart(): void {
    const client = this.client;
    this.client = undefined;
    this.cursor = undefined;
    this.inTransaction = false;
    this.reads = 0;
    client?.release(true);
  }

  /**
   * The next `n` rows; a stopped statement reads no more (a rejection, never a throw), unless its
   * COMMIT is on its way already: then the (empty) read of a completed cursor goes on.
   */
  async read(n: number): Promise<TextRow[]> {
    if (!this.ending) this.stop.throwIfStopped();
    this.reads += 1;
    // Execute and Flush in one write.
    this.reading = this.corked(() => this.cursor!.read(n));
    try {
      return await this.reading;
    } finally {
      this.reading = undefined;
    }
  }

  /**
   * The statement completed in PostgreSQL (its CommandComplete is being handled, the portal's
   * Close and Sync are being written): sends the COMMIT and the session's reset in the same write,
   * one round trip instead of two, when nothing that could still fail the statement comes before
   * its commit but the encoding of the rows read. So only in the first read: a result shorter than
   * one batch, whose body the runner holds until its end (nothing of it has gone out, and a stop
   * cannot fail a write of it); later reads have sent batches that a stop may cut. Not when a stop
   * came, nor when a column's type must still be looked up on another connection: a lookup that
   * failed after the commit would answer an error for a statement that took effect (an INSERT …
   * RETURNING a client would then send again). These leave the commit to commit(), as before.
   */
  private commitWithClose(client: PoolClient, cursor: TextCursor): void {
    if (this.reads !== 1 || this.stop.reason !== undefined || this.ending) return;
    if (!this.db.typesKnown(cursor.fields.map((field) => field.dataTypeID))) return;
    const connection = (client as unknown as { connection: Connection }).connection;
    const ending = new TransactionEnd();
    ending.sendNow(connection);
    // Next in the client's queue: it takes the answers that follow the portal's ReadyForQuery.
    void client.query(ending);
    this.ending = ending;
  }

  /**
   * The statement ran to its end: closes the portal and commits, unless told to stop meanwhile;
   * the session's reset goes with the COMMIT. A reset that fails after the commit went through
   * does not fail the statement: its connection is dropped instead of pooled. A COMMIT already
   * sent with the close (commitWithClose) is awaited: a stop that came after it is too late.
   */
  async commit(): Promise<void> {
    await this.cursor!.close();
    if (!this.ending) this.stop.throwIfStopped();
    const end = this.ending ?? this.client!.query(new TransactionEnd());
    const { committed, reset, error } = await end.done;
    if (!committed) throw error ?? new Error('COMMIT was not acknowledged');
    this.inTransaction = false;
    this.reset = reset;
    this.broken = !reset;
    this.stop.settle();
  }

  /**
   * The statement failed with `err`: what PostgreSQL still holds for it is let go — a read in
   * flight cancelled and awaited, the portal closed, the transaction rolled back — so that the
   * connection can take the next statement; when one of these fails, the connection is broken.
   */
  async abandon(err: unknown): Promise<void> {
    this.stop.settle();
    // Anything but an error from PostgreSQL or a stop may have left the exchange half done.
    this.broken = !isPgError(err) && !(err instanceof ProducerStoppedError);
    // A read still on its way must land before the portal can be closed: cut it short.
    const reading = this.reading;
    if (reading) {
      await this.cancel();
      await reading.catch(() => undefined); // its failure is not the one being reported
    }
    // A COMMIT sent with the portal's close ended the transaction, whether or not it committed
    // (a COMMIT that fails rolls back): what is left is the reset it may not have reached.
    if (this.ending) {
      const { committed, reset } = await this.ending.done;
      this.inTransaction = false;
      this.reset = committed && reset;
    }
    // A suspended portal holds the connection: nothing else runs on it until it is closed.
    if (this.cursor?.open) {
      await this.cursor.close().catch(() => {
        this.broken = true;
      });
    }
    if (this.client && this.inTransaction && !this.broken) {
      await this.client.query('ROLLBACK').catch(() => {
        this.broken = true;
      });
    }
  }

  /** Always last: ends the watching and hands the connection back, or drops it when broken. */
  async release(): Promise<void> {
    this.stop.dispose();
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    // Session state a statement may have changed (SET, LISTEN, temp tables) must not leak.
    if (!this.broken && !this.reset) {
      await client.query('DISCARD ALL').catch(() => (this.broken = true));
    }
    client.release(this.broken);
  }

  /** Runs `send` with the connection's socket corked: what it writes leaves in one write. */
  private corked<T>(send: () => T): T {
    const socket = this.client && socketOf(this.client);
    socket?.cork();
    try {
      return send();
    } finally {
      socket?.uncork();
    }
  }

  /** Cancels this statement, and no other that its connection may have moved on to. */
  private async cancel(): Promise<void> {
    const pid = (this.client as { processID?: number } | undefined)?.processID;
    if (!pid) return;
    // A failed cancel leaves the statement to its time limit, its client check or its end.
    await this.db.cancelStatement(pid, this.applicationName).catch(() => false);
  }
}
