import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Socket } from 'node:net';
import { Client, type Connection } from 'pg';
import { connectTestDatabase } from '@test/settings';
import { Parser } from 'pg-protocol/dist/parser';
import { MAX_VALUE_CHARS, oversizedRow } from './oversized-value.guard';
import { TextCursor } from './text.cursor';

type HandlePacket = (offset: number, code: number, length: number, bytes: Buffer) => unknown;

const OID_BOOL = 16;
const OID_INT8 = 20;
const OID_INT4 = 23;
const OID_TEXT = 25;
const OID_JSONB = 3802;

/**
 * TextCursor leans on pg-cursor's internals (its Parse message, `_result`, `state`, the
 * commandComplete hook), so pg-cursor is pinned to one version and these specs say loudly what
 * an upgrade broke.
 */
describe(TextCursor.name, () => {
  let client: Client;

  beforeAll(async () => {
    client = await connectTestDatabase();
  });

  afterAll(async () => {
    await client.end();
  });

  function open(text: string, values: (string | null)[] = [], types: number[] = []): TextCursor {
    return client.query(new TextCursor(text, values, types));
  }

  it('is built against the pg-cursor version package.json pins exactly', () => {
    const root = join(__dirname, '../../../..');
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const installed = JSON.parse(
      readFileSync(join(dirname(require.resolve('pg-cursor')), 'package.json'), 'utf8'),
    ) as { version: string };
    expect(manifest.dependencies['pg-cursor']).toBe(installed.version);
  });

  it('sends the parameter types in the Parse message', async () => {
    // Untyped, `$1` alone could not be typed and `->>` would be ambiguous: PostgreSQL refuses both.
    const cursor = open(
      "select $1 as i, pg_typeof($2)::text as big, $3 as b, $4->>'k' as k",
      ['7', '9007199254740991', 'true', '{"k":"v"}'],
      [OID_INT4, OID_INT8, OID_BOOL, OID_JSONB],
    );
    expect((await cursor.readBatch(10)).text()).toEqual([['7', 'bigint', 't', 'v']]);
    expect(cursor.fields.map((f) => f.dataTypeID)).toEqual([
      OID_INT4,
      OID_TEXT,
      OID_BOOL,
      OID_TEXT,
    ]);
    await cursor.close();
  });

  it('leaves the connection as it found it, however many statements it has run', async () => {
    // Wrapping the connection's parse anew on each statement without undoing it chains one more
    // call per statement on a pooled connection: a worker slowed down the longer it served.
    const connection = (client as unknown as { connection: { parse: unknown } }).connection;
    const parse = connection.parse;
    for (let i = 0; i < 3; i++) {
      const cursor = open('select $1::int as n', [String(i)], [OID_INT4]);
      expect((await cursor.readBatch(10)).text()).toEqual([[String(i)]]);
      await cursor.close();
    }
    // Also after a statement PostgreSQL refuses.
    await expect(open('select from nowhere_at_all', [], []).read(10)).rejects.toThrow(
      /nowhere_at_all/,
    );
    expect(connection.parse).toBe(parse);
    expect(Object.prototype.hasOwnProperty.call(connection, 'parse')).toBe(false);
  });

  it('leaves a parameter of type 0 to PostgreSQL to infer, like a literal', async () => {
    const cursor = open('select $1::int + 1 as n, $2::text as t', ['41', null], [0, 0]);
    expect((await cursor.readBatch(10)).text()).toEqual([['42', null]]);
    await cursor.close();
  });

  it('knows the columns after the first read, also when there is no row', async () => {
    const cursor = open("select 1 as a, 'x'::text as b where false");
    expect((await cursor.readBatch(10)).text()).toEqual([]);
    expect(cursor.fields.map((f) => [f.name, f.dataTypeID])).toEqual([
      ['a', OID_INT4],
      ['b', OID_TEXT],
    ]);
    await cursor.close();
  });

  it('keeps the command tag of statements with and without rows', async () => {
    const tag = async (text: string): Promise<[string | undefined, number]> => {
      const cursor = open(text);
      while ((await cursor.read(10)).length > 0);
      await cursor.close();
      return [cursor.commandTag, cursor.fields.length];
    };
    expect(await tag('create temp table text_cursor_spec (n int)')).toEqual(['CREATE TABLE', 0]);
    expect(await tag('insert into text_cursor_spec values (1), (2), (3)')).toEqual([
      'INSERT 0 3',
      0,
    ]);
    expect(await tag('select n from text_cursor_spec')).toEqual(['SELECT 3', 1]);
    expect(await tag('drop table text_cursor_spec')).toEqual(['DROP TABLE', 0]);
  });

  it('is open while the portal is suspended, not once it is read to the end or closed', async () => {
    const cursor = open('select g from generate_series(1, 3) g');
    expect(cursor.open).toBe(true);
    expect((await cursor.readBatch(2)).text()).toEqual([['1'], ['2']]);
    expect(cursor.open).toBe(true);
    await cursor.close();
    expect(cursor.open).toBe(false);

    const whole = open('select g from generate_series(1, 3) g');
    expect(await whole.readBatch(10)).toHaveLength(3);
    expect((await whole.readBatch(10)).text()).toEqual([]);
    expect(whole.open).toBe(false);
  });

  it('hands a read its rows in the turn of the event loop their last message came in', async () => {
    // Each piece of the socket's data queues an immediate ahead of the cursor's handling of it:
    // pg-cursor's own delivery, from an immediate of its own, would come after that one.
    const stream = (client as unknown as { connection: Connection }).connection.stream;
    let turnedOver = false;
    const onData = () => {
      turnedOver = false;
      setImmediate(() => (turnedOver = true));
    };
    stream.prependListener('data', onData);
    try {
      const cursor = open('select g from generate_series(1, 5) g');
      expect(await cursor.readBatch(2)).toHaveLength(2);
      expect(turnedOver).toBe(false);
      // The last rows: handed over at the ReadyForQuery that follows the portal's close.
      expect(await cursor.readBatch(10)).toHaveLength(3);
      expect(turnedOver).toBe(false);

      // Read to its end: the empty read and the close answer at once.
      let immediate = false;
      setImmediate(() => (immediate = true));
      expect(await cursor.readBatch(10)).toHaveLength(0);
      await cursor.closePortal();
      expect(immediate).toBe(false);
    } finally {
      stream.removeListener('data', onData);
    }
    expect((await client.query('select 1 as n')).rows).toEqual([{ n: 1 }]);
  });

  it('is not open after the statement failed, and the connection takes the next query', async () => {
    const cursor = open('select 1 / (g - 2) from generate_series(1, 3) g');
    await expect(cursor.read(10)).rejects.toMatchObject({ code: '22012' });
    expect(cursor.open).toBe(false);
    const next = await client.query('select 42 as n');
    expect(next.rows).toEqual([{ n: 42 }]);
  });

  describe('refuses COPY over the wire: the statement fails alone and the connection goes on', () => {
    // pg's client hands COPY's messages to handlers pg-cursor lacks: a TypeError in the socket's
    // listener, uncaught, ended the worker thread and every statement on it.
    const COPY_REFUSED = { code: 'STATEMENT_ERROR', sqlState: '0A000' };

    it.each([
      ['with rows', 'copy (select g from generate_series(1, 3) g) to stdout'],
      ['with none', 'copy (select 1 where false) to stdout'],
    ])('COPY TO STDOUT %s', async (_, text) => {
      const cursor = open(text);
      const refused = jest.fn();
      cursor.onRefused = refused;
      await expect(cursor.read(10)).rejects.toMatchObject(COPY_REFUSED);
      expect(refused).toHaveBeenCalledTimes(1);
      expect(cursor.open).toBe(false);
      expect((await client.query('select 42 as n')).rows).toEqual([{ n: 42 }]);
    });

    it('COPY FROM STDIN: PostgreSQL is told the copy failed, and nothing is inserted', async () => {
      await client.query('create temp table text_cursor_copy_spec (n int)');
      const cursor = open('copy text_cursor_copy_spec from stdin');
      const refused = jest.fn();
      cursor.onRefused = refused;
      await expect(cursor.read(10)).rejects.toMatchObject(COPY_REFUSED);
      // CopyFail ends it: nothing else needs cancelling.
      expect(refused).not.toHaveBeenCalled();
      const { rows } = await client.query('select count(*)::int as n from text_cursor_copy_spec');
      expect(rows).toEqual([{ n: 0 }]);
      await client.query('drop table text_cursor_copy_spec');
    });

    it('and keeps no listener on the connection once the statement is over', async () => {
      const connection = (client as unknown as { connection: Connection }).connection;
      const before = connection.listenerCount('copyOutResponse');
      await expect(open('copy (select 1) to stdout').read(10)).rejects.toMatchObject(COPY_REFUSED);
      const cursor = open('select 1');
      await cursor.read(10);
      await cursor.close();
      expect(connection.listenerCount('copyOutResponse')).toBe(before);
    });
  });

  describe('fails the statement alone on a row with a value too long for a string, and reads no more', () => {
    // A real value that long would cost gigabytes (oversized-value.guard.spec.ts and
    // data-row.message.spec.ts read one): the row is marked too long where each path looks.
    async function refusedAndConnectionGoesOn(): Promise<void> {
      const cursor = open('select g from generate_series(1, 5) g');
      const refused = jest.fn();
      cursor.onRefused = refused;
      await expect(cursor.read(10)).rejects.toMatchObject({
        code: 'RESULT_TOO_LARGE',
        sqlState: '54000',
      });
      expect(refused).toHaveBeenCalledTimes(1);
      expect(cursor.open).toBe(false);
      expect((await client.query('select 42 as n')).rows).toEqual([{ n: 42 }]);
    }

    it('the first row, which comes as pg’s message', async () => {
      const connection = (client as unknown as { connection: Connection }).connection;
      const emit = connection.emit.bind(connection);
      let rows = 0;
      connection.emit = (event: string | symbol, ...args: unknown[]) =>
        event === 'dataRow' && ++rows === 1 ? emit(event, oversizedRow(100)) : emit(event, ...args);
      try {
        await refusedAndConnectionGoesOn();
      } finally {
        delete (connection as Partial<Connection>).emit;
      }
    });

    it('a later row, which the parser hands the cursor straight', async () => {
      // The third DataRow handed to the parser's handler as a body of one value past the longest
      // string: its bytes a stand-in whose decoding fails as Node's would.
      const proto = Parser.prototype as unknown as { handlePacket: HandlePacket };
      const handlePacket = proto.handlePacket;
      const tooLong = MAX_VALUE_CHARS + 1;
      const body = {
        readInt16BE: () => 1,
        readInt32BE: () => tooLong,
        toString: () => {
          throw Object.assign(new Error('too long'), { code: 'ERR_STRING_TOO_LONG' });
        },
      } as unknown as Buffer;
      let rows = 0;
      proto.handlePacket = function (this: unknown, offset, code, length, bytes) {
        if (code === 0x44 && ++rows === 3) {
          return handlePacket.call(this, 0, code, 4 + 2 + 4 + tooLong, body);
        }
        return handlePacket.call(this, offset, code, length, bytes);
      };
      try {
        await refusedAndConnectionGoesOn();
      } finally {
        proto.handlePacket = handlePacket;
      }
      // The statement's five and the one of the query after it.
      expect(rows).toBe(6);
    });
  });

  describe('takes the rows after a read’s first straight from the parser', () => {
    function dataRowEvents(): { count: () => number; stop: () => void } {
      const connection = (client as unknown as { connection: Connection }).connection;
      let rows = 0;
      const listener = () => rows++;
      connection.on('dataRow', listener);
      return { count: () => rows, stop: () => connection.removeListener('dataRow', listener) };
    }

    it('one row a read reaches pg as a message: the batch has them all, in order', async () => {
      const events = dataRowEvents();
      try {
        const cursor = open('select g, md5(g::text) from generate_series(1, 250) g');
        const first = await cursor.readBatch(100);
        const second = await cursor.readBatch(1000);
        expect(first.text().map((r) => r[0])).toEqual(
          Array.from({ length: 100 }, (_, i) => String(i + 1)),
        );
        expect(second.text().map((r) => r[0])).toEqual(
          Array.from({ length: 150 }, (_, i) => String(i + 101)),
        );
        expect(second.text()[0][1]).toBe(createHash('md5').update('101').digest('hex'));
        expect(events.count()).toBe(2);
      } finally {
        events.stop();
      }
    });

    it('and gives the next query its rows as messages again: after the end, an error, a notice between rows', async () => {
      const ended = open('select g from generate_series(1, 20) g');
      expect((await ended.readBatch(100)).length).toBe(20);
      expect((await client.query('select g from generate_series(1, 3) g')).rows).toHaveLength(3);

      const failing = open('select 1 / (3 - g) from generate_series(1, 5) g');
      await expect(failing.readBatch(100)).rejects.toMatchObject({ code: '22012' });
      expect((await client.query('select g from generate_series(1, 4) g')).rows).toHaveLength(4);

      await client.query(
        `create or replace function pg_temp.noisy(n int) returns int language plpgsql as
         $$ begin raise notice 'row %', n; return n; end $$`,
      );
      const noisy = open('select pg_temp.noisy(g) from generate_series(1, 6) g');
      expect((await noisy.readBatch(100)).text().map((r) => r[0])).toEqual([
        '1',
        '2',
        '3',
        '4',
        '5',
        '6',
      ]);
      expect((await client.query('select g from generate_series(1, 5) g')).rows).toHaveLength(5);
    });
  });

  describe('bounds the bytes one read holds', () => {
    const MOST = 100_000;
    const wide = (rows: number) =>
      client.query(
        new TextCursor(
          `select repeat('x', 30000) from generate_series(1, ${rows})`,
          [],
          [],
          [],
          MOST,
        ),
      );

    it('fails the statement alone when a read of several rows passes the bound', async () => {
      const cursor = wide(10);
      const refused = jest.fn();
      cursor.onRefused = refused;
      await expect(cursor.read(10)).rejects.toMatchObject({
        code: 'RESULT_TOO_LARGE',
        message: expect.stringContaining('fetch_size'),
      });
      expect(refused).toHaveBeenCalledTimes(1);
      expect((await client.query('select 42 as n')).rows).toEqual([{ n: 42 }]);
    });

    it('counts each read afresh, takes one row however wide, and tells the widest', async () => {
      const cursor = wide(10);
      expect(await cursor.readBatch(3)).toHaveLength(3);
      expect(await cursor.readBatch(3)).toHaveLength(3);
      expect(cursor.widestRow).toBeGreaterThan(30000);
      await cursor.close();
      const one = client.query(new TextCursor("select repeat('x', 300000)", [], [], [], MOST));
      expect(await one.readBatch(5)).toHaveLength(1);
      await one.close();
    });
  });

  describe('with a prelude', () => {
    const TABLE = 'text_cursor_prelude_spec';

    beforeAll(async () => {
      await client.query(`drop table if exists ${TABLE}; create table ${TABLE} (n int)`);
    });

    afterAll(async () => {
      await client.query(`drop table if exists ${TABLE}`);
    });

    it('runs BEGIN and the SET LOCALs first, in the same transaction, and keeps its own tag', async () => {
      const cursor = client.query(
        new TextCursor(
          `insert into ${TABLE} select current_setting('application_name')::int`,
          [],
          [],
          ['BEGIN', "SET LOCAL application_name = '7'"],
        ),
      );
      expect((await cursor.readBatch(10)).text()).toEqual([]);
      await cursor.close();
      expect(cursor.commandTag).toBe('INSERT 0 1');
      // Still in the prelude's transaction: rolled back, the row is gone.
      await client.query('ROLLBACK');
      expect((await client.query(`select count(*)::int as n from ${TABLE}`)).rows).toEqual([
        { n: 0 },
      ]);
    });

    it('never runs the statement when a prelude statement fails: not even as the login role', async () => {
      const cursor = client.query(
        new TextCursor(
          `insert into ${TABLE} values (1)`,
          [],
          [],
          ['BEGIN', 'SET LOCAL ROLE sluice_no_such_role_for_this_spec'],
        ),
      );
      await expect(cursor.read(10)).rejects.toMatchObject({ code: '22023' });
      expect(cursor.open).toBe(false);
      await client.query('ROLLBACK');
      expect((await client.query(`select count(*)::int as n from ${TABLE}`)).rows).toEqual([
        { n: 0 },
      ]);
    });

    it('sends the prelude, the statement and a read corked together in one write', async () => {
      // What StatementLife.start relies on: submit and read write synchronously, so a cork
      // around them makes one write of it all.
      const socket = (client as unknown as { connection: { stream: Socket } }).connection.stream;
      type WriteV = (chunks: unknown[], cb: (err?: Error) => void) => void;
      const internals = socket as unknown as { _writev: WriteV };
      const writev = internals._writev;
      const writes: number[] = [];
      internals._writev = function (this: Socket, chunks, cb) {
        writes.push(chunks.length);
        writev.call(this, chunks, cb);
      };
      try {
        socket.cork();
        const cursor = client.query(
          new TextCursor('select 1 as one', [], [], ['BEGIN', "SET LOCAL application_name = 'x'"]),
        );
        const rows = cursor.readBatch(10);
        socket.uncork();
        expect((await rows).text()).toEqual([['1']]);
        await client.query('ROLLBACK');
      } finally {
        internals._writev = writev;
      }
      // BEGIN, SET: Parse, Bind, Execute each; the statement: Parse, Bind, Describe, Flush; the
      // read: Execute, Flush.
      expect(writes[0]).toBe(12);
    });
  });
});
