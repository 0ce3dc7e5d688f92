import Cursor from 'pg-cursor';
import type { Connection, FieldDef } from 'pg';

/** Keeps every value as PostgreSQL's text: the encoders work from the text form. */
const RAW_TEXT = { getTypeParser: () => (value: string) => value };

interface CursorInternals {
  _result: { fields: FieldDef[] };
  handleCommandComplete(msg: { text: string }): void;
  submit(connection: Connection): void;
}

type ParseMessage = Parameters<Connection['parse']>[0];

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
 * pg-cursor has no public way to do either, so this reaches into it (submit, `_result`, `state`,
 * the commandComplete hook): it is pinned to one exact version in package.json, and
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
  /** Prelude statements whose CommandComplete has not come yet. */
  private preludeLeft: number;

  constructor(
    text: string,
    values: (string | null)[],
    paramTypes: number[],
    prelude: readonly string[] = [],
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
      connection.parse = (query: ParseMessage, more: boolean) =>
        parse({ ...query, types: paramTypes as never }, more);
      try {
        internals.submit.call(this, connection);
      } finally {
        delete (connection as Partial<Connection>).parse;
      }
    };
  }

  /** True while the portal is open: the connection takes no other query until it is closed. */
  get open(): boolean {
    const state = (this as unknown as { state: string }).state;
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

  handleCommandComplete(msg: { text: string }): void {
    if (this.preludeLeft > 0) {
      this.preludeLeft--;
      return;
    }
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
}
