import type { PoolClient } from 'pg';
import type { TextRow } from '@app/formats';
import { ProducerStoppedError, ResultWriter, StopReason } from '@app/transport';
import { DatabaseHandle } from './database.registry';
import { isPgError } from './pg.error';
import { StatementStop } from './statement.stop';
import { TextCursor } from './text.cursor';

/**
 * One statement's hold on PostgreSQL, from its connection to the connection's return: the pooled
 * client, the transaction, the cursor, the read in flight, and the StatementStop through which a
 * cancel, the client's loss and the time limit all end it. A stop cancels the statement where
 * PostgreSQL runs it; the writer, interrupted, fails a write waiting for the client.
 *
 * Its life: start → read… → commit, or, on any failure, abandon; then always release, the one
 * place the connection goes back to its pool (or is dropped) and the watching ends.
 */
export class StatementLife {
  private readonly stop: StatementStop;
  private client: PoolClient | undefined;
  private cursor: TextCursor | undefined;
  /** The read PostgreSQL is answering: the statement runs there while this is set. */
  private reading: Promise<TextRow[]> | undefined;
  private inTransaction = false;
  /** The connection may be out of step with the server: dropped, not pooled. */
  private broken = false;

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

  /** Takes the connection, begins the transaction with `beginSql`, and opens `cursor` on it. */
  async start(client: PoolClient, beginSql: string, cursor: TextCursor): Promise<TextCursor> {
    this.client = client;
    await client.query(beginSql);
    this.inTransaction = true;
    this.cursor = client.query(cursor);
    return cursor;
  }

  /** The next `n` rows; a stopped statement reads no more (a rejection, never a throw). */
  async read(n: number): Promise<TextRow[]> {
    this.stop.throwIfStopped();
    this.reading = this.cursor!.read(n);
    try {
      return await this.reading;
    } finally {
      this.reading = undefined;
    }
  }

  /** The statement ran to its end: closes the portal and commits, unless told to stop meanwhile. */
  async commit(): Promise<void> {
    await this.cursor!.close();
    this.stop.throwIfStopped();
    await this.client!.query('COMMIT');
    this.inTransaction = false;
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
    if (!this.broken) await client.query('DISCARD ALL').catch(() => (this.broken = true));
    client.release(this.broken);
  }

  /** Cancels this statement, and no other that its connection may have moved on to. */
  private async cancel(): Promise<void> {
    const pid = (this.client as { processID?: number } | undefined)?.processID;
    if (!pid) return;
    // A failed cancel leaves the statement to its time limit, its client check or its end.
    await this.db.cancelStatement(pid, this.applicationName).catch(() => false);
  }
}
