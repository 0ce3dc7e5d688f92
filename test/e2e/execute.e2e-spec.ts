import {
  UUID_V4,
  closeDb,
  db,
  e2eEnv,
  execute,
  grantSchema,
  login,
  request,
} from './support/client';
import { randomName } from './support/service';

const schema = randomName('e2e_exec');

beforeAll(async () => {
  await db().query(`CREATE SCHEMA ${schema}`);
  await db().query(`CREATE TABLE ${schema}.items (id int PRIMARY KEY, name text, price numeric)`);
  await db().query(
    `INSERT INTO ${schema}.items VALUES (1, 'apple', 1.25), (2, 'pear', 2.5), (3, 'it''s', 10)`,
  );
  await grantSchema(schema);
});

afterAll(async () => {
  await db().query(`DROP SCHEMA ${schema} CASCADE`);
  await closeDb();
});

describe('POST /v1/execute', () => {
  it('returns schema, rows as arrays and the status last in the array format', async () => {
    const res = await execute({
      statement: 'select g, g * 2 as double from generate_series(1, 3) g',
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.json.query_id).toMatch(UUID_V4);
    expect(res.headers.get('x-query-id')).toBe(res.json.query_id);
    expect(res.json.schema).toEqual([
      { name: 'g', type: 'integer' },
      { name: 'double', type: 'integer' },
    ]);
    expect(res.json.data).toEqual([
      [1, 2],
      [2, 4],
      [3, 6],
    ]);
    expect(res.json.status).toEqual({
      reason: 'OK',
      sql_state: '00000',
      vendor_code: 0,
      row_count: 3,
    });
    expect(Object.keys(res.json)).toEqual(['query_id', 'schema', 'data', 'status']);
  });

  it('returns rows as objects keyed by column in the collection format', async () => {
    const res = await execute({
      statement: `select id, name from ${schema}.items order by id`,
      format: 'collection',
    });
    expect(res.status).toBe(200);
    expect(res.json.schema).toBeUndefined();
    expect(res.json.data).toEqual([
      { id: 1, name: 'apple' },
      { id: 2, name: 'pear' },
      { id: 3, name: "it's" },
    ]);
    expect(Object.keys(res.json)).toEqual(['query_id', 'data', 'status']);
  });

  it('binds {name} placeholders and quoted literals as parameters, never as SQL text', async () => {
    const res = await execute({
      statement: `select id, name, '{label}' as label from ${schema}.items where id >= {min} and name <> {skip} order by id`,
      params: { min: 2, skip: "x'; drop table items; --", label: "O'Brien" },
    });
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([
      [2, 'pear', "O'Brien"],
      [3, "it's", "O'Brien"],
    ]);
    const still = await db().query(`select count(*)::int as n from ${schema}.items`);
    expect(still.rows[0].n).toBe(3);
  });

  it('types parameters like literals: integers, numerics, booleans, nulls, arrays and objects', async () => {
    const res = await execute({
      statement:
        "select {i} as i, {big} as big, {f} as f, {b} as b, {n}::text as n, 2 = any({arr}) as has2, {obj}->>'k' as k",
      params: {
        i: 7,
        big: 9007199254740991,
        f: 1.5,
        b: true,
        n: null,
        arr: [1, 2, 3],
        obj: { k: 'v' },
      },
    });
    expect(res.status).toBe(200);
    expect(res.json.schema.map((c: { type: string }) => c.type)).toEqual([
      'integer',
      'bigint',
      'numeric',
      'boolean',
      'text',
      'boolean',
      'text',
    ]);
    expect(res.json.data).toEqual([[7, 9007199254740991, 1.5, true, null, true, 'v']]);
  });

  it('caps rows with max_rows and says the result was truncated', async () => {
    const res = await execute({
      statement: 'select g from generate_series(1, 100) g',
      max_rows: 5,
      fetch_size: 2,
    });
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([[1], [2], [3], [4], [5]]);
    expect(res.json.status).toMatchObject({ row_count: 5, truncated: true });
    const exact = await execute({
      statement: 'select g from generate_series(1, 5) g',
      max_rows: 5,
    });
    expect(exact.json.status.truncated).toBeUndefined();
    expect(exact.json.data).toHaveLength(5);
  });

  it('answers max_rows 0 with no row, never with the whole result in one batch', async () => {
    // An Execute of 0 rows is PostgreSQL's "every row": the cap must never ask for that.
    const res = await execute(
      { statement: 'select g from generate_series(1, 5) g', max_rows: 0, fetch_size: 2 },
      { headers: { accept: 'application/stream+json' } },
    );
    expect(res.status).toBe(200);
    const lines = res.text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.filter((line) => 'data' in line)).toEqual([]);
    expect(lines[0].schema).toEqual([{ name: 'g', type: 'integer' }]);
    expect(lines[lines.length - 1].status).toMatchObject({ row_count: 0, truncated: true });
    const none = await execute({ statement: 'select 1 where false', max_rows: 0 });
    expect(none.json.data).toEqual([]);
    expect(none.json.status.truncated).toBeUndefined();
  });

  it('runs the statement with the given schema on the search_path', async () => {
    const res = await execute({ statement: 'select count(*) as n from items', schema });
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([[3]]);
  });

  it('runs the statement in the given database', async () => {
    const res = await execute({
      statement: 'select current_database() as db',
      database: 'postgres',
    });
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([['postgres']]);
  });

  it('takes the database from the path of /v1/execute/{database}', async () => {
    const res = await execute(
      { statement: 'select current_database()' },
      { path: '/v1/execute/postgres' },
    );
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([['postgres']]);
  });

  it('refuses a path database that contradicts the body', async () => {
    const res = await execute(
      { statement: 'select 1', database: 'test' },
      { path: '/v1/execute/postgres' },
    );
    expect(res.status).toBe(400);
    expect(res.json.status.vendor_code).toBe(-100);
  });

  it('accepts a text/plain body with the options in the query string', async () => {
    const res = await execute(undefined, {
      raw: 'select g from generate_series(1, 4) g',
      path: '/v1/execute?format=collection&max_rows=2',
      headers: { 'content-type': 'text/plain' },
    });
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([{ g: 1 }, { g: 2 }]);
    expect(res.json.status.truncated).toBe(true);
  });

  it('accepts GET with the request in the query string, also with a database in the path', async () => {
    const token = await login();
    const qs = new URLSearchParams({
      statement: 'select {x}::int + 1 as y, current_database() as db',
      params: '{"x":41}',
    });
    const res = await request(undefined, {
      method: 'GET',
      token,
      path: `/v1/execute/postgres?${qs.toString()}`,
    });
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([[42, 'postgres']]);
    const plain = await request(undefined, {
      method: 'GET',
      token,
      path: `/v1/execute?${new URLSearchParams({ statement: 'select 1 as one' }).toString()}`,
    });
    expect(plain.json.data).toEqual([[1]]);
  });

  it('reports statements without rows with their command tag and empty data', async () => {
    const table = `${schema}.made_${Date.now()}`;
    const created = await execute({ statement: `create table ${table} (a int)` });
    expect(created.status).toBe(200);
    expect(created.json.data).toEqual([]);
    expect(created.json.schema).toEqual([]);
    expect(created.json.status).toMatchObject({
      reason: 'CREATE TABLE',
      sql_state: '00000',
      vendor_code: 0,
    });
    const inserted = await execute({
      statement: `insert into ${table} select generate_series(1, 3)`,
    });
    expect(inserted.json.status.reason).toBe('INSERT 0 3');
    const { rows } = await db().query(`select count(*)::int as n from ${table}`);
    expect(rows[0].n).toBe(3);
  });

  it('returns every value exactly as PostgreSQL to_json() gives it', async () => {
    const values = `
      (32767::int2, (-2147483648)::int4, 9223372036854775807::int8, 1234567890123456789012345678901234567890.5::numeric,
       'NaN'::float8, 'Infinity'::float4, 0.1::float8, e'q"uo\\\\te \u00e9 \u{1F600}'::text, true, '2024-02-29'::date,
       '13:14:15.5'::time, '2024-01-02 03:04:05.678'::timestamp, '2024-01-02 03:04:05+05:30'::timestamptz,
       '1 year 2 mons 3 days 04:05:06'::interval, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, '{"a": [1, 2.50]}'::json,
       '{"b": {"c": null}}'::jsonb, '\\xdeadbeef'::bytea, array[[1, null], [3, 4]]::int[], array['a,b', 'c"d', null]::text[],
       null::text)`;
    const statement = `select * from (values ${values}) v(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t, u)`;
    const res = await execute({ statement });
    expect(res.json.status).toMatchObject({ sql_state: '00000' });
    const cols = 'abcdefghijklmnopqrstu'.split('');
    const parts = cols.map((c) => `coalesce(to_json(${c})::text, 'null')`).join(`, ',', `);
    const { rows } = await db().query(
      `select concat('[', ${parts}, ']') as j from (values ${values}) v(${cols.join(', ')})`,
    );
    // Compare the JSON text of the row, not parsed values, so that every digit counts.
    const row = res.text.slice(res.text.indexOf('"data":[') + 8, res.text.indexOf('],"status"'));
    expect(row).toBe(rows[0].j);
  });

  it('delivers a 200 000-row result whole, and it parses', async () => {
    const res = await execute({
      statement: 'select g, md5(g::text) as h from generate_series(1, 200000) g',
    });
    expect(res.status).toBe(200);
    expect(res.json.data).toHaveLength(200000);
    expect(res.json.data[0]).toEqual([1, 'c4ca4238a0b923820dcc509a6f75849b']);
    expect(res.json.data[199999][0]).toBe(200000);
    expect(res.json.status.row_count).toBe(200000);
  });

  it('reports a failure after the first rows in the status at the end of the document', async () => {
    const res = await execute({
      statement: 'select 1 / (5000 - g) as x from generate_series(1, 10000) g',
      fetch_size: 1000,
    });
    expect(res.status).toBe(200);
    expect(res.json.data.length).toBeGreaterThanOrEqual(1000);
    expect(res.json.data.length).toBeLessThan(5000);
    expect(res.json.status).toMatchObject({ sql_state: '22012', vendor_code: -520 });
    expect(res.json.status.reason).toMatch(/division by zero/);
  });

  it('streams newline-delimited JSON for application/stream+json', async () => {
    const res = await execute(
      { statement: 'select g from generate_series(1, 5) g', fetch_size: 2 },
      { headers: { accept: 'application/stream+json' } },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/stream\+json/);
    const lines = res.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toEqual({
      query_id: expect.stringMatching(UUID_V4),
      schema: [{ name: 'g', type: 'integer' }],
    });
    expect(lines.slice(1, -1)).toEqual([
      { data: [[1], [2]] },
      { data: [[3], [4]] },
      { data: [[5]] },
    ]);
    expect(lines[lines.length - 1]).toEqual({
      status: { reason: 'OK', sql_state: '00000', vendor_code: 0, row_count: 5 },
    });
  });

  it('leaves no session state behind: a SET in one statement does not reach the next', async () => {
    const before = await execute({ statement: 'select current_setting($$TimeZone$$) as tz' });
    expect(before.json.data).toEqual([['UTC']]);
    await Promise.all(
      Array.from({ length: 5 }, () =>
        execute({ statement: "select set_config('TimeZone', 'Asia/Tokyo', false)" }),
      ),
    );
    const after = await Promise.all(
      Array.from({ length: 5 }, () =>
        execute({ statement: 'select current_setting($$TimeZone$$) as tz' }),
      ),
    );
    for (const res of after) expect(res.json.data).toEqual([['UTC']]);
    expect(e2eEnv().keyPrefix).toMatch(/^sluice-e2e-/);
  });
});
