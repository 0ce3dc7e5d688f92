import Cursor from 'pg-cursor';
import type { Connection, FieldDef } from 'pg';
import { SluiceError } from '@app/contracts';
import { DataRowReader, RowBatch } from '@app/formats';
import {
  DataRowMessage,
  DataRowSink,
  hasOversizedValue,
  readDataRowsOnDemand,
} from './data-row.message';
import { MAX_VALUE_CHARS, guardOversizedValues, isOversizedRow } from './oversized-value.guard';

// Before any connection of this thread reads a row: a value too long fails its statement alone,
// and a cursor's rows are copied as bytes, not decoded into strings.
guardOversizedValues();
readDataRowsOnDemand();

/** Keeps every value as PostgreSQL's text: the encoders work from the text form. */
const RAW_TEXT = { getTypeParser: () => (value: string) => value };

interface CursorInternals {
  _result: { fields: FieldDef[] };
  handleCommandComplete(msg: { text: string }): void;
  handleDataRow(msg: unknown): void;
  handlePortalSuspended(): void;
  handleReadyForQuery(): void;
  handleError(err: unknown): void;
  submit(connection: Connection): void;
}

/** What a statement that starts COPY FROM STDIN or COPY TO STDOUT fails with. */
export function copyRefused(): SluiceError {
  return new SluiceError(
    'STATEMENT_ERROR',
    'COPY FROM STDIN and COPY TO STDOUT are not supported: insert rows with INSERT, read them with SELECT',
    '0A000',
  );
}

/** What a statement fails with when a value of its result is longer than a string can hold. */
export function valueTooLarge(): SluiceError {
  return new SluiceError(
    'RESULT_TOO_LARGE',
    `a value in the result is too large to be sent: over ${MAX_VALUE_CHARS} characters`,
  );
}

/**
 * The most bytes of rows one read holds (as PostgreSQL sends them). A read is `fetch_size` rows
 * held in the thread at once, and its next one is read while it is encoded: without a bound,
 * `fetch_size` rows of megabytes each exhaust the thread's heap, and the thread dies with every
 * statement it runs, other users' included. One row alone is always taken (a value is bounded by
 * MAX_VALUE_CHARS); the runner asks for fewer rows a read once it has seen how wide they are.
 */
export const MAX_READ_BYTES = 64 * 1024 * 1024;

/** What a statement fails with when one read of `fetch_size` rows passes `most` bytes. */
export function readTooLarge(most: number): SluiceError {
  return new SluiceError(
    'RESULT_TOO_LARGE',
    `the rows of one read passed ${Math.round(most / (1024 * 1024))} MiB: send a smaller fetch_size`,
  );
}

type ParseMessage = Parameters<Connection['parse']>[0];

/** What pg-cursor's delivery of a read touches (see TextCursor._sendRows). */
interface CursorRows {
  state: string;
  _cb: ((err: null, rows: unknown, result: unknown) => void) | null;
  _rows: unknown;
  _result: { rows: unknown };
}

/**
 * A pg-cursor that sends parameter types in its Parse message (pg-cursor sends none) and keeps
 * the command tag, with type parsing off and rows as arrays.
 *
 * It may run a `prelude` first (BEGIN and the SET LOCALs that give the statement its role):
 * each as Parse/Bind/Execute ahead of the cursor's own messages, in the same extended-protocol
 * batch with no Sync between them. A prelude statement that fails therefore makes PostgreSQL skip
 * everything up to the next Sync — the user's statement is never parsed, let alone run under the
 * wrong role — and the error reaches the cursor's first read. Their CommandCompletes are the
 * first ones the cursor sees and are not its own.
 *
 * It refuses what it cannot take, failing the statement alone and leaving the connection in step
 * with the server: COPY's own sub-protocol (pg-cursor has no handler for it; pg's client would
 * throw in the socket's listener and end the thread) and a row with a value too long for a
 * string (see guardOversizedValues). A refused statement fails at the end of its read, with
 * copyRefused() or valueTooLarge(); onRefused is told at once, so that whatever of it still runs
 * can be cancelled.
 *
 * pg-cursor has no public way to do any of this, so this reaches into it (submit, `_result`,
 * `state`, its message handlers): it is pinned to one exact version in package.json, and
 * text.cursor.spec.ts fails on any of these behaviours when it changes. Casting the placeholders
 * in the SQL instead (`($1::int4)`) would need no patch but is not the same statement: PostgreSQL
 * names a cast column after its type, so `select {n}` would answer `int4`, not `?column?`.
 */
export class TextCursor extends Cursor<(string | null)[]> {
  commandTag: string | undefined;
  /**
   * Told when the statement completed in PostgreSQL, while the portal's Close and Sync are being
   * written: whatever it writes to the connection goes in the same write, after them.
   */
  onComplete: (() => void) | undefined;
  /**
   * Told when the cursor refused the statement's output (a COPY TO STDOUT, a value too long):
   * the statement may run on in PostgreSQL, and should be cancelled.
   */
  onRefused: (() => void) | undefined;
  /** Prelude statements whose CommandComplete has not come yet. */
  private preludeLeft: number;
  /** Why the statement fails, once the cursor refused something PostgreSQL sent for it. */
  private refusal: SluiceError | undefined;
  /** Rows and their bytes in the read under way. */
  private readRows = 0;
  private readBytes = 0;
  /** The widest row read so far, in bytes as PostgreSQL sent it. */
  widestRow = 0;
  /** The rows of the read under way, as bytes. */
  private readonly batch = new DataRowReader();
  /** The parser's message whose sink is this cursor's, while rows come straight to it. */
  private sunk: DataRowMessage | undefined;
  /** The connection while it may send a CopyOutResponse for this cursor. */
  private watched: Connection | undefined;
  private readonly copyOut = () => this.refuse(copyRefused(), { cancel: true });

  constructor(
    text: string,
    values: (string | null)[],
    paramTypes: number[],
    prelude: readonly string[] = [],
    private readonly maxReadBytes = MAX_READ_BYTES,
  ) {
    super(text, values, { rowMode: 'array', types: RAW_TEXT } as never);
    this.preludeLeft = prelude.length;
    const internals = Cursor.prototype as unknown as CursorInternals;
    this.submit = (connection: Connection) => {
      for (const sql of prelude) {
        connection.parse({ text: sql, name: '', types: [] }, true);
        connection.bind({}, true);
        connection.execute({}, true);
      }
      // Shadowed for this one call and then removed, so the prototype's parse shows through
      // again: restoring a wrapper instead would chain one more call per statement on a pooled
      // connection.
      const parse = connection.parse.bind(connection);
      connection.parse = (query: ParseMessage, more: boolean) => {
        // pg-cursor's own message, made for this one call: set on it, not copied (a literal
        // that spreads an object and adds a field is V8's slow path, about a microsecond).
        query.types = paramTypes as never;
        return parse(query, more);
      };
      try {
        internals.submit.call(this, connection);
      } finally {
        delete (connection as Partial<Connection>).parse;
      }
      // pg's client ignores CopyOutResponse: the one sign of a COPY TO STDOUT with no rows.
      this.watched = connection;
      connection.on('copyOutResponse', this.copyOut);
    };
  }

  /** True while the portal is open: the connection takes no other query until it is closed. */
  get open(): boolean {
    const state = this.cursorState;
    return state !== 'done' && state !== 'error' && state !== 'initialized';
  }

  /**
   * False while a prelude statement has not completed: PostgreSQL has not begun the user's
   * statement (it runs the messages of a batch in order), so nothing of it ran.
   */
  get statementReached(): boolean {
    return this.preludeLeft === 0;
  }

  /** Columns of the result, known after the first read. */
  get fields(): FieldDef[] {
    return (this as unknown as CursorInternals)._result.fields ?? [];
  }

  /** The next `rows` rows (none once the statement is read to its end). */
  async readBatch(rows: number): Promise<RowBatch> {
    // Read to its end: pg-cursor would answer from an immediate, a turn of the event loop later.
    if (this.cursorState === 'done') return RowBatch.EMPTY;
    const read: unknown = await this.read(rows);
    return read instanceof RowBatch ? read : RowBatch.EMPTY;
  }

  /** Closes the portal; a cursor read to its end has none left (no turn of the event loop). */
  closePortal(): Promise<void> {
    return this.cursorState === 'done' ? Promise.resolve() : this.close();
  }

  /**
   * pg-cursor's own delivery of a read's rows (at PortalSuspended and ReadyForQuery), less its
   * setImmediate: `read()` resolves a promise, whose continuation runs once the message at hand
   * is handled anyway, so the immediate only cost a turn of the event loop (an empty poll of the
   * thread's sockets) per read. The state changes in the order pg-cursor makes them.
   */
  protected _sendRows(): void {
    const self = this as unknown as CursorRows;
    self.state = 'idle';
    const cb = self._cb;
    // Removed before it is called: the continuation may ask for the next read.
    self._cb = null;
    if (cb) {
      self._result.rows = self._rows;
      cb(null, self._rows, self._result);
    }
    self._rows = [];
  }

  /** pg-cursor's state (its own field): initialized, submitted, idle, busy, done or error. */
  private get cursorState(): string {
    return (this as unknown as CursorRows).state;
  }

  handleDataRow(msg: unknown): void {
    if (!(msg instanceof DataRowMessage)) return this.takeDecoded(msg);
    try {
      if (this.taken(msg.bytes, msg.from, msg.to, msg.length)) {
        this.batch.add(msg.bytes, msg.from, msg.to);
      }
    } finally {
      msg.release();
    }
    // The rest of the read's rows come from the parser straight to the batch, until the first
    // message that is not a row: each of those the cursor hears of clears the sink (unsink).
    msg.sink = this.sink;
    this.sunk = msg;
  }

  /** The rows the parser reads while the sink is set: copied at its flushes, a run at a time. */
  private readonly sink: DataRowSink = {
    row: (bytes, from, to, length) => {
      if (this.taken(bytes, from, to, length)) this.batch.addLater(bytes, from, to);
    },
    flush: () => this.batch.flush(),
  };

  /** Checks a DataRow whose body is `bytes[from, to)`: false when it is to be dropped. */
  private taken(bytes: Buffer, from: number, to: number, length: number): boolean {
    if (hasOversizedValue(bytes, from, to)) this.refuse(valueTooLarge(), { cancel: true });
    return this.counted(length);
  }

  /** A row another parser gave decoded already (or marked too long to be read). */
  private takeDecoded(msg: unknown): void {
    if (isOversizedRow(msg)) this.refuse(valueTooLarge(), { cancel: true });
    if (!this.counted((msg as { length?: number }).length ?? 0)) return;
    const body = dataRowBody((msg as { fields: (string | null)[] }).fields);
    this.batch.add(body, 0, body.length);
  }

  /** Counts a row of `bytes` in the read; false when it is to be dropped (the read refused). */
  private counted(bytes: number): boolean {
    this.widestRow = Math.max(this.widestRow, bytes);
    this.readRows++;
    this.readBytes += bytes;
    if (this.readRows > 1 && this.readBytes > this.maxReadBytes) {
      this.refuse(readTooLarge(this.maxReadBytes), { cancel: true });
    }
    // Rows after a refusal are dropped: the read fails at its end.
    return this.refusal === undefined;
  }

  /** Rows come as messages again: the next message may be another query's. */
  private unsink(): void {
    if (this.sunk) this.sunk.sink = undefined;
    this.sunk = undefined;
  }

  /** COPY FROM STDIN: PostgreSQL waits for data; a CopyFail makes it fail the statement. */
  handleCopyInResponse(connection: Connection): void {
    this.unsink();
    this.refuse(copyRefused(), { cancel: false });
    (connection as Connection & { sendCopyFail(message: string): void }).sendCopyFail(
      'COPY FROM STDIN is not supported',
    );
  }

  /** COPY TO STDOUT: its rows are dropped while the statement is cancelled. */
  handleCopyData(): void {
    this.unsink();
    this.refuse(copyRefused(), { cancel: true });
  }

  handlePortalSuspended(): void {
    this.unsink();
    // The read is over: the next one counts afresh.
    this.readRows = 0;
    this.readBytes = 0;
    if (this.refusal) return this.failRefused();
    this.deliver();
    (Cursor.prototype as unknown as CursorInternals).handlePortalSuspended.call(this);
  }

  handleReadyForQuery(): void {
    this.unsink();
    this.unwatch();
    this.deliver();
    (Cursor.prototype as unknown as CursorInternals).handleReadyForQuery.call(this);
  }

  /** What pg-cursor hands to the read's callback (its `_rows`): the batch gathered. */
  private deliver(): void {
    (this as unknown as { _rows: unknown })._rows = this.batch.take();
  }

  /** PostgreSQL's error, or the socket's; a refused statement fails with its refusal instead. */
  handleError(err: unknown): void {
    this.unsink();
    this.unwatch();
    (Cursor.prototype as unknown as CursorInternals).handleError.call(this, this.refusal ?? err);
  }

  handleCommandComplete(msg: { text: string }): void {
    this.unsink();
    if (this.preludeLeft > 0) {
      this.preludeLeft--;
      return;
    }
    // Never commitWithClose a refused statement (COPY (INSERT … RETURNING) TO STDOUT).
    if (this.refusal) return this.failRefused();
    this.commandTag = msg.text;
    // pg-cursor answers it with Close and Sync (and onComplete may add to them): one write.
    const socket = (this as unknown as { connection?: Connection }).connection?.stream;
    socket?.cork();
    try {
      (Cursor.prototype as unknown as CursorInternals).handleCommandComplete.call(this, msg);
      this.onComplete?.();
    } finally {
      socket?.uncork();
    }
  }

  /** Fails the statement with `refusal` at the end of its read; `cancel`: tell onRefused. */
  private refuse(refusal: SluiceError, { cancel }: { cancel: boolean }): void {
    if (this.refusal) return;
    this.refusal = refusal;
    if (cancel) this.onRefused?.();
  }

  /**
   * Fails the read with the refusal, as pg-cursor fails one with PostgreSQL's error: its Sync
   * ends the exchange (the ReadyForQuery that answers it ends the cursor), and the transaction is
   * left to be rolled back.
   */
  private failRefused(): void {
    this.handleError(this.refusal);
  }

  private unwatch(): void {
    this.watched?.removeListener('copyOutResponse', this.copyOut);
    this.watched = undefined;
  }
}

/** A DataRow's body for values given as text (a row that reached the cursor decoded already). */
function dataRowBody(fields: (string | null)[]): Buffer {
  const values = fields.map((f) => (f === null ? null : Buffer.from(f, 'utf8')));
  const body = Buffer.alloc(2 + values.reduce((n, v) => n + 4 + (v?.length ?? 0), 0));
  body.writeInt16BE(values.length, 0);
  let at = 2;
  for (const v of values) {
    body.writeInt32BE(v === null ? -1 : v.length, at);
    at += 4;
    if (v !== null) at += v.copy(body, at);
  }
  return body;
}
