import type { Connection, PoolClient } from 'pg';
import type { RowBatch } from '@app/formats';
import { ProducerStoppedError, ResultWriter, StopReason } from '@app/transport';
import { DatabaseHandle } from './database.registry';
import { backendOf } from './backend.signal';
import { isPgError } from './pg.error';
import { StatementStop } from './statement.stop';
import { TextCursor } from './text.cursor';
import { TransactionEnd } from './transaction.end';

/**
 * How long a cancelled statement may go on before its session is ended instead (ms): a statement
 * can catch a cancel (an exception handler in PL/pgSQL), never the end of its session.
 */
export const TERMINATE_AFTER_MS = 2_000;

/** Whether `running` settles (either way) within `ms`. */
async function settlesWithin(running: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([
      running.then(
        () => true,
        () => true,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The socket under a pg client: corked so that the messages of one step go in one write. */
function socketOf(client: PoolClient): { cork(): void; uncork(): void } | undefined {
  return (client as unknown as { connection?: { stream?: { cork(): void; uncork(): void } } })
    .connection?.stream;
}

/**
 * One statement's hold on PostgreSQL, from its connection to the connection's return: the pooled
 * client, the transaction, the cursor, the read in flight, and the StatementStop through which a
 * cancel, the client's loss and the time limit all end it. A stop cancels the statement where
 * PostgreSQL runs it — and ends its session when the statement outlives the cancel; the writer,
 * interrupted, fails a write waiting for the client. The connection goes back to its pool only
 * once no signal for this statement can still reach it.
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
  private reading: Promise<RowBatch> | undefined;
  /** What PostgreSQL runs for the statement now: a read, or the COMMIT (deferred triggers run). */
  private running: Promise<unknown> | undefined;
  /** The signals sent to stop what ran (`of`), and whether they are done. */
  private stopping: { of: Promise<unknown>; done: Promise<void> } | undefined;
  private inTransaction = false;
  /** The session was reset with the commit: release() need not reset it again. */
  private reset = false;
  /** The connection may be out of step with the server: dropped, not pooled. */
  private broken = false;
  /** The COMMIT and reset once sent: with the portal's close when the statement completed. */
  private ending: TransactionEnd | undefined;
  /** Reads asked for so far, the first one included. */
  private reads = 0;
  /** The cancel of a statement whose output the cursor refused (see TextCursor.onRefused). */
  private refusing: Promise<void> | undefined;

  constructor(
    private readonly db: DatabaseHandle,
    writer: ResultWriter,
    timeoutMs: number | undefined,
    /** How the transaction ends when the statement ran to its end (ROLLBACK: a read-only user). */
    private readonly end: 'COMMIT' | 'ROLLBACK' = 'COMMIT',
  ) {
    this.stop = new StatementStop(writer, timeoutMs, () => void this.stopRunning());
  }

  /** The first reason to stop, if any came. */
  get stopReason(): StopReason | undefined {
    return this.stop.reason;
  }

  /**
   * Takes the connection and opens `cursor` on it (its prelude begins the transaction), asking
   * for the first `rows` at once: prelude, statement and first read leave in one write.
   */
  start(client: PoolClient, cursor: TextCursor, rows: number): Promise<RowBatch> {
    this.client = client;
    // A stopped statement queues no cursor: one never read would hold the connection for good.
    this.stop.throwIfStopped();
    this.inTransaction = true;
    cursor.onComplete = () => this.commitWithClose(client, cursor);
    cursor.onRefused = () => {
      this.refusing ??= this.stopRunning();
    };
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
  async read(n: number): Promise<RowBatch> {
    // PostgreSQL reads 0 as "every row": one read would pull the whole result into memory.
    if (!(n >= 1)) throw new Error(`a read must ask for at least one row, not ${n}`);
    if (!this.ending) this.stop.throwIfStopped();
    this.reads += 1;
    // Execute and Flush in one write.
    const reading = this.corked(() => this.cursor!.readBatch(n));
    this.reading = reading;
    try {
      return await this.inPostgres(reading);
    } finally {
      this.reading = undefined;
    }
  }

  /** Awaits `work` as what PostgreSQL runs for the statement: what a stop stops. */
  private async inPostgres<T>(work: Promise<T>): Promise<T> {
    this.running = work;
    try {
      return await work;
    } finally {
      if (this.running === work) this.running = undefined;
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
    const ending = new TransactionEnd(this.end);
    ending.sendNow(connection);
    // Next in the client's queue: it takes the answers that follow the portal's ReadyForQuery.
    ending.queue(client);
    this.ending = ending;
  }

  /**
   * The statement ran to its end: closes the portal and commits, unless told to stop meanwhile;
   * the session's reset goes with the COMMIT. A reset that fails after the commit went through
   * does not fail the statement: its connection is dropped instead of pooled. A COMMIT already
   * sent with the close (commitWithClose) is awaited: a stop that came after it is too late.
   */
  async commit(): Promise<void> {
    await this.cursor!.closePortal();
    if (!this.ending) this.stop.throwIfStopped();
    const end = (this.ending ??= this.endTransaction());
    // A stop that comes now stops the COMMIT too: deferred triggers run in it.
    const { committed, reset, error } = await this.inPostgres(end.done);
    if (!committed) throw error ?? new Error('COMMIT was not acknowledged');
    this.inTransaction = false;
    this.reset = reset;
    this.broken = !reset;
    this.stop.committed();
  }

  /**
   * The statement failed with `err`: what PostgreSQL still holds for it is let go — a read in
   * flight cancelled and awaited, the portal closed, the transaction rolled back — so that the
   * connection can take the next statement; when one of these fails, the connection is broken.
   */
  async abandon(err: unknown): Promise<void> {
    this.stop.settle();
    // Anything but an error from PostgreSQL or a stop may have left the exchange half done.
    this.broken ||= !isPgError(err) && !(err instanceof ProducerStoppedError);
    // A read still on its way must land before the portal can be closed: cut it short.
    const reading = this.reading;
    if (reading) {
      await this.stopRunning();
      await reading.catch(() => undefined); // its failure is not the one being reported
    }
    // A cancel on its way must not land on the ROLLBACK: let it land first (idle, it is ignored).
    await this.refusing;
    // A COMMIT sent with the portal's close ended the transaction, whether or not it committed
    // (a COMMIT that fails rolls back), and the reset after it ran either way: what is left is a
    // reset that failed.
    if (this.ending) {
      const { reset } = await this.ending.done;
      this.inTransaction = false;
      this.reset = reset;
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
    // A signal still on its way must not reach the statement that takes the connection next.
    await this.stopping?.done;
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    // Session state a statement may have changed (SET, LISTEN, temp tables) must not leak.
    if (!this.broken && !this.reset) {
      await client.query('DISCARD ALL').catch(() => (this.broken = true));
    }
    client.release(this.broken);
  }

  /** Queues the COMMIT (or ROLLBACK) and the session's reset, in one write. */
  private endTransaction(): TransactionEnd {
    const ending = new TransactionEnd(this.end);
    this.corked(() => ending.queue(this.client!));
    return ending;
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

  /** Stops what PostgreSQL runs for the statement now (see stopInPostgres), once for each. */
  private stopRunning(): Promise<void> {
    const running = this.running;
    if (!running) return this.stopping?.done ?? Promise.resolve();
    if (this.stopping?.of !== running) {
      this.stopping = { of: running, done: this.stopInPostgres(running) };
    }
    return this.stopping.done;
  }

  /**
   * Cancels `running` in its backend; when it goes on TERMINATE_AFTER_MS after the cancel (a
   * statement that catches it), ends the backend's session, and the connection is dropped. A signal that fails leaves the statement to its end. The
   * connection stays this statement's meanwhile (release() waits for this), so the signals can
   * only reach this statement's backend.
   */
  private async stopInPostgres(running: Promise<unknown>): Promise<void> {
    const backend = this.client && backendOf(this.client);
    if (!backend) return;
    // A cancel that could not be sent is followed by the terminate below, as a cancel that the
    // statement outlived; a terminate that fails leaves the statement to its end (see above), its
    // connection dropped, not pooled.
    await this.db.cancel(backend).catch(() => undefined);
    if (await settlesWithin(running, TERMINATE_AFTER_MS)) return;
    this.broken = true;
    await this.db.terminate(backend).catch(() => false);
  }
}
