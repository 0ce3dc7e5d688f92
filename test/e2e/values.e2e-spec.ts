import { spawnSync } from 'node:child_process';
import { tableFromIPC } from 'apache-arrow';
import { closeDb, db, execute, grantSchema } from './support/client';
import { open, readAll } from './support/raw';
import { ROOT, randomName } from './support/service';

const schema = randomName('e2e_values');
// The schema hstore is in: ours when this spec installed it, else wherever the database has it.
let hstoreSchema = '';

beforeAll(async () => {
  const s = schema;
  await db().query(`CREATE SCHEMA ${s}`);
  // The test database's superuser may install it; Sluice's own logins never need to.
  const found = await db().query<{ schema: string }>(
    `SELECT extnamespace::regnamespace::text AS schema FROM pg_extension WHERE extname = 'hstore'`,
  );
  if (found.rows.length === 0) {
    await db().query(`CREATE EXTENSION IF NOT EXISTS hstore SCHEMA ${s}`);
  }
  const { rows } = await db().query<{ schema: string }>(
    `SELECT extnamespace::regnamespace::text AS schema FROM pg_extension WHERE extname = 'hstore'`,
  );
  hstoreSchema = rows[0].schema;
  const hstore = `${hstoreSchema}.hstore`;
  await db().query(`
    CREATE TABLE ${s}.items (id int PRIMARY KEY, name text, tags text[], price numeric, at timestamptz);
    INSERT INTO ${s}.items VALUES
      (1, 'plain', '{a,b}', 1.50, '2024-01-02 03:04:05+00'),
      (2, 'quote " backslash \\ comma , paren ( ) brace { }', '{"x,y","q\\"",NULL,""}', NULL, NULL),
      (3, '', '{}', 'NaN', 'infinity'),
      (4, NULL, NULL, -0.001, '1900-06-01 12:00:00+00'),
      (5, E'line\\nbreak\\ttab é 😀', '{"NULL"}', 12345678901234567890.123456789, NULL);
    CREATE TYPE ${s}.inner AS (a int, "b c" text, d numeric);
    CREATE TYPE ${s}.outer AS (i ${s}.inner, arr int[], ia ${s}.inner[], t timestamptz, j jsonb,
      b bool, note text);
    CREATE TABLE ${s}.nested (id int PRIMARY KEY, o ${s}.outer, os ${s}.outer[]);
    INSERT INTO ${s}.nested VALUES
      (1, row(row(1, 'a "q" \\ b, (c)', 1.50), '{1,2}', ARRAY[row(2, NULL, NULL)::${s}.inner, NULL],
          '2024-01-02 03:04:05+00', '{"k": [1, "x"]}', true, ''),
          ARRAY[row(NULL, '{}', '{}', NULL, 'null', false, 'NULL')::${s}.outer]),
      (2, row(NULL, NULL, NULL, NULL, NULL, NULL, NULL), '{}'),
      (3, NULL, NULL);
    CREATE TABLE ${s}.kv (id int PRIMARY KEY, h ${hstore}, hs ${hstore}[]);
    INSERT INTO ${s}.kv VALUES
      (1, '"a"=>"1", "b"=>NULL, "c d"=>"x\\"y", "\\\\"=>"", "é"=>"😀"', ARRAY['k=>v'::${hstore}, NULL, '']),
      (2, '', '{}'),
      (3, NULL, NULL);`);
  await grantSchema(s);
});

afterAll(async () => {
  // DROP SCHEMA takes the extension with it when it lives there.
  await db().query(`DROP SCHEMA ${schema} CASCADE`);
  await closeDb();
});

/**
 * What to_json() gives for each of `exprs` over `from`, straight from PostgreSQL under the
 * settings every Sluice statement runs with: the `data` array of Sluice's JSON, as text.
 */
async function toJsonData(exprs: string[], from: string): Promise<string> {
  const client = await db().connect();
  try {
    await client.query(
      `BEGIN; SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO'; SET LOCAL IntervalStyle = 'postgres'`,
    );
    const { rows } = await client.query<string[]>({
      text: `SELECT ${exprs.map((e) => `to_json(${e})::text`).join(', ')} ${from}`,
      rowMode: 'array',
    });
    await client.query('COMMIT');
    return `[${rows.map((r) => `[${r.map((v) => v ?? 'null').join(',')}]`).join(',')}]`;
  } finally {
    client.release();
  }
}

/** The `data` array of a JSON response, as the bytes Sluice sent. */
function dataText(body: string): string {
  const start = body.indexOf('"data":') + '"data":'.length;
  const end = body.lastIndexOf(',"status":');
  return body.slice(start, end);
}

const CASES: [string, string[], string][] = [
  ['a table row type', ['t'], `FROM ${schema}.items t ORDER BY id`],
  ['nested composites with arrays of composites', ['o', 'os'], `FROM ${schema}.nested ORDER BY id`],
  ['an array of composites', ['array_agg(t ORDER BY id)'], `FROM ${schema}.items t`],
  ['a composite field of a row', ['(o).i', '(o).ia'], `FROM ${schema}.nested ORDER BY id`],
  ['hstore and hstore[]', ['h', 'hs'], `FROM ${schema}.kv ORDER BY id`],
  ['a row holding hstore', ['k'], `FROM ${schema}.kv k ORDER BY id`],
];

describe('values of composite types and types with a cast to json', () => {
  it.each(CASES)('equal to_json() byte for byte: %s', async (_, exprs, from) => {
    const res = await execute({ statement: `SELECT ${exprs.join(', ')} ${from}` });
    expect(res.status).toBe(200);
    expect(res.json.status.sql_state).toBe('00000');
    const want = await toJsonData(exprs, from);
    expect(want).toContain('{');
    expect(dataText(res.text)).toBe(want);
  });

  it('gives the same values in stream+json and in the collection layout', async () => {
    const from = `FROM ${schema}.nested ORDER BY id`;
    const want = JSON.parse(await toJsonData(['o'], from)) as unknown[][];
    const stream = await execute(
      { statement: `SELECT o ${from}` },
      { headers: { accept: 'application/stream+json' } },
    );
    const lines = stream.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { data?: unknown[] });
    expect(lines.flatMap((l) => l.data ?? [])).toEqual(want);
    const collection = await execute({ statement: `SELECT o ${from}`, format: 'collection' });
    expect(collection.json.data).toEqual(want.map(([o]) => ({ o })));
  });

  it('follows ALTER TABLE: a row type changed under the same oid comes out with its new columns', async () => {
    const from = `FROM ${schema}.items t ORDER BY id`;
    // Every worker thread loads the row type first.
    for (let i = 0; i < 4; i++) await execute({ statement: `SELECT t ${from}` });
    await db().query(`ALTER TABLE ${schema}.items ADD COLUMN extra int DEFAULT 7`);
    await db().query(`ALTER TABLE ${schema}.items RENAME COLUMN name TO label`);
    const want = await toJsonData(['t'], from);
    expect(want).toContain('"label":');
    for (let i = 0; i < 4; i++) {
      const res = await execute({ statement: `SELECT t ${from}` });
      expect(dataText(res.text)).toBe(want);
    }
  });

  it('gives anonymous records as their text form: their field names and types are not in the result', async () => {
    const from = `FROM (SELECT 1 AS x, 'a b' AS y) s`;
    const res = await execute({ statement: `SELECT row(1, 'a b'), s, (s.x, s.y) ${from}` });
    expect(res.json.schema.map((c: { type: string }) => c.type)).toEqual([
      'record',
      'record',
      'record',
    ]);
    expect(res.json.data).toEqual([['(1,"a b")', '(1,"a b")', '(1,"a b")']]);
    // to_json() names the fields after where the row came from, which the result does not say.
    expect(JSON.parse(await toJsonData(["row(1, 'a b')", 's'], from))).toEqual([
      [
        { f1: 1, f2: 'a b' },
        { x: 1, y: 'a b' },
      ],
    ]);
  });
});

/**
 * Reads a Parquet file with hyparquet (ESM-only: in a plain node process), its pages' codecs with
 * hyparquet-compressors, JSON as text.
 */
function readParquet(file: Buffer): Record<string, unknown>[] {
  const reader = `
    const { parquetReadObjects } = require('hyparquet');
    const { compressors } = require('hyparquet-compressors');
    const data = require('node:fs').readFileSync(0);
    const file = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
    parquetReadObjects({ file, utf8: false, compressors, parsers: {
      jsonFromBytes: (v) => v && Buffer.from(v).toString('utf8'),
      stringFromBytes: (v) => v && Buffer.from(v).toString('utf8'),
    } }).then((rows) => process.stdout.write(JSON.stringify(rows)));`;
  const run = spawnSync(process.execPath, ['-e', reader], {
    cwd: ROOT,
    input: file,
    maxBuffer: 1 << 28,
  });
  if (run.status !== 0) throw new Error(`hyparquet: ${run.stderr.toString()}`);
  return JSON.parse(run.stdout.toString()) as Record<string, unknown>[];
}

/** One RFC 4180 field as Sluice's CSV writes it (and PostgreSQL's COPY … CSV). */
function csvField(text: string | null): string {
  if (text === null) return '';
  return text === '' || /[",\r\n]|^ | $/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

describe('composites and hstore in the other formats', () => {
  const statement = `SELECT n.id, n.o, n.os, k.h, k.hs FROM ${schema}.nested n
    JOIN ${schema}.kv k USING (id) ORDER BY n.id`;

  /** Per row: to_json() of o and h, and of each element of os and hs (null for a NULL array). */
  async function elementsJson(): Promise<Record<string, unknown>[]> {
    const client = await db().connect();
    try {
      await client.query(`BEGIN; SET LOCAL TimeZone = 'UTC'`);
      const { rows } = await client.query<Record<string, unknown>>(`
        SELECT n.id, to_json(n.o)::text AS o, to_json(k.h)::text AS h,
               (SELECT array_agg(to_json(n.os[i])::text ORDER BY i)
                  FROM generate_subscripts(n.os, 1) i) AS os,
               (SELECT array_agg(to_json(k.hs[i])::text ORDER BY i)
                  FROM generate_subscripts(k.hs, 1) i) AS hs,
               n.os IS NOT NULL AND cardinality(n.os) = 0 AS os_empty,
               k.hs IS NOT NULL AND cardinality(k.hs) = 0 AS hs_empty
          FROM ${schema}.nested n JOIN ${schema}.kv k USING (id) ORDER BY n.id`);
      await client.query('COMMIT');
      return rows.map((r) => ({
        id: r.id,
        o: r.o,
        os: r.os_empty ? [] : r.os,
        h: r.h,
        hs: r.hs_empty ? [] : r.hs,
      }));
    } finally {
      client.release();
    }
  }

  it('writes them to Parquet as JSON columns (lists of JSON for arrays) holding to_json()', async () => {
    const res = await open({ statement }, { accept: 'application/parquet' });
    expect(res.statusCode).toBe(200);
    // hyparquet leaves a NULL list out of its row object.
    const rows = readParquet(await readAll(res)).map((r): Record<string, unknown> => ({
      ...r,
      os: r.os ?? null,
      hs: r.hs ?? null,
    }));
    expect(rows).toEqual(await elementsJson());
    expect(rows[0].o).toMatch(/^\{"i":\{"a":1,/);
  });

  it('writes them to Arrow as JSON (arrow.json) strings, lists of them for arrays', async () => {
    const res = await open({ statement }, { accept: 'application/vnd.apache.arrow.stream' });
    expect(res.statusCode).toBe(200);
    const table = tableFromIPC(await readAll(res));
    const fields = new Map(table.schema.fields.map((f) => [f.name, f]));
    expect(String(fields.get('o')?.type)).toBe('Utf8');
    expect(fields.get('o')?.metadata.get('ARROW:extension:name')).toBe('arrow.json');
    expect(fields.get('h')?.metadata.get('ARROW:extension:name')).toBe('arrow.json');
    expect(String(fields.get('os')?.type)).toBe('List<Utf8>');
    const rows = table.toArray().map((row: Record<string, unknown>) => {
      const list = (v: unknown) =>
        v === null ? null : [...(v as Iterable<string | null>)].map((e) => e);
      return { id: row.id, o: row.o, os: list(row.os), h: row.h, hs: list(row.hs) };
    });
    expect(rows).toEqual(await elementsJson());
  });

  it("writes them to CSV in PostgreSQL's text form, as it does arrays", async () => {
    const res = await execute({ statement }, { headers: { accept: 'text/csv' } });
    expect(res.status).toBe(200);
    const { rows } = await db().query<string[]>({
      text: `SELECT n.id::text, n.o::text, n.os::text, k.h::text, k.hs::text FROM ${schema}.nested n
        JOIN ${schema}.kv k USING (id) ORDER BY n.id`,
      rowMode: 'array',
    });
    const want = ['id,o,os,h,hs', ...rows.map((r) => r.map(csvField).join(','))].join('\r\n');
    expect(res.text).toBe(want + '\r\n');
  });
});

describe('dates of a statement that changes DateStyle for itself', () => {
  // to_json() prints ISO whatever DateStyle says; Parquet and Arrow read only ISO text.
  const statement = `select d, d::timestamp as ts, d::timestamptz as tstz
    from (select set_config('DateStyle', 'German', true)) s, (values (date '2026-11-28')) v(d)`;

  it.each(['application/json', 'application/stream+json', 'application/parquet'])(
    'are refused with 400 and SQLSTATE 22007 in %s, not written in another form',
    async (accept) => {
      const res = await execute({ statement }, { headers: { accept } });
      expect(res.status).toBe(400);
      // The error envelope alone: no row went out.
      expect(Object.keys(res.json as object).sort()).toEqual(['query_id', 'status']);
      expect(res.json.status).toMatchObject({ sql_state: '22007', vendor_code: -520 });
    },
  );

  it("are PostgreSQL's text as it comes in CSV", async () => {
    const res = await execute({ statement }, { headers: { accept: 'text/csv' } });
    expect(res.status).toBe(200);
    expect(res.text).toBe(
      'd,ts,tstz\r\n28.11.2026,28.11.2026 00:00:00,28.11.2026 00:00:00 UTC\r\n',
    );
  });
});
