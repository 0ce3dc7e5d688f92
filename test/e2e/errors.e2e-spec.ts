import { closeDb, db, e2eEnv, execute, grantSchema, login, request } from './support/client';
import { grantToControl } from './support/roles';
import { randomName } from './support/service';

const schema = randomName('e2e_err');

beforeAll(async () => {
  await db().query(`CREATE SCHEMA ${schema}`);
  await db().query(`CREATE TABLE ${schema}.t (a int)`);
  await grantSchema(schema);
});

afterAll(async () => {
  await db().query(`DROP SCHEMA ${schema} CASCADE`);
  await closeDb();
});

function expectEnvelope(
  res: { json: { status: Record<string, unknown> } },
  sqlState: string,
  vendorCode: number,
) {
  expect(res.json.status).toEqual({
    reason: expect.any(String),
    sql_state: sqlState,
    vendor_code: vendorCode,
  });
  expect(JSON.stringify(res.json)).not.toMatch(/at .*\.(js|ts):\d+/);
}

describe('errors of POST /v1/execute', () => {
  it('returns 400 for a body that is not JSON', async () => {
    const res = await execute(undefined, { raw: '{"statement": "select 1"' });
    expect(res.status).toBe(400);
    expectEnvelope(res, '08P01', -100);
  });

  it('returns 400 naming an unknown field', async () => {
    const res = await execute({ statement: 'select 1', bogus: true });
    expect(res.status).toBe(400);
    expectEnvelope(res, '08P01', -100);
    expect(res.json.status.reason).toMatch(/bogus/);
  });

  it.each([
    [{ statement: 'select 1', fetch_size: -1 }, /fetch_size/],
    [{ statement: 'select 1', fetch_size: 1.5 }, /fetch_size/],
    [{ statement: 'select 1', max_rows: -3 }, /max_rows/],
    [{ statement: 'select 1', format: 'table' }, /format/],
    [{ statement: 'select 1', params: [1, 2] }, /params/],
    [{ statement: 42 }, /statement/],
    [{ statement: '' }, /statement/],
    [{}, /statement/],
  ])('returns 400 for out-of-range or mistyped values: %j', async (body, field) => {
    const res = await execute(body);
    expect(res.status).toBe(400);
    expectEnvelope(res, '08P01', -100);
    expect(res.json.status.reason).toMatch(field);
  });

  it('returns 400 when a placeholder has no value', async () => {
    const res = await execute({ statement: 'select {missing}', params: { other: 1 } });
    expect(res.status).toBe(400);
    expectEnvelope(res, '42P02', -101);
    expect(res.json.status.reason).toMatch(/missing/);
  });

  it('returns 400 for what JSON.parse would change or drop: a number past a double, a lone surrogate, a key given twice', async () => {
    const token = await login();
    for (const [body, reason] of [
      ['{"statement":"select {x}::bigint","params":{"x":9007199254740993}}', /9007199254740993/],
      // A proxy or audit log in front may read the first; JSON.parse keeps the last.
      [
        '{"statement":"select 1","\\u0073tatement":"select pg_sleep(1)"}',
        /key "statement" is given twice/,
      ],
      ['{"statement":"select {a}","params":{"a":1,"a":2}}', /key "a" is given twice/],
      ['{"statement":"select 1","__proto__":{"x":1}}', /key "__proto__" is not accepted/],
      ['{"statement":"select {x}::numeric","params":{"x":0.12345678901234567891}}', /double/],
      [
        '{"statement":"select {s}::text","params":{"s":"a\\ud800"}}',
        /parameter "s" .*lone surrogate/,
      ],
      ['{"statement":"select \'\\udc00\'"}', /statement .*lone surrogate/],
    ] as const) {
      const res = await fetch(`${e2eEnv().baseUrl}/v1/execute`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body,
      });
      const json = (await res.json()) as { status: { reason: string } };
      expect({ body, status: res.status }).toEqual({ body, status: 400 });
      expectEnvelope({ json }, '08P01', -100);
      expect(json.status.reason).toMatch(reason);
    }
    // What a double holds, and a surrogate pair, run.
    const ok = await execute({
      statement: 'select {x}::float8, {s}::text',
      params: { x: 0.1, s: '\u{1f600}' },
    });
    expect(ok.status).toBe(200);
    expect(ok.json.data).toEqual([[0.1, '\u{1f600}']]);
  });

  it('returns 400 with SQLSTATE 42601 and vendor code -500 for a syntax error', async () => {
    const res = await execute({ statement: 'selec 1' });
    expect(res.status).toBe(400);
    expect(res.json.query_id).toBeDefined();
    expectEnvelope(res, '42601', -500);
  });

  it('returns 400 with vendor code -501, "one statement per request", for two statements', async () => {
    const res = await execute({ statement: 'select 1; select 2' });
    expect(res.status).toBe(400);
    expectEnvelope(res, '42601', -501);
    expect(res.json.status.reason).toMatch(/^one statement per request/);
  });

  it('returns 400 with vendor code -600 for an undefined table', async () => {
    const res = await execute({ statement: 'select * from no_such_table_here' });
    expect(res.status).toBe(400);
    expectEnvelope(res, '42P01', -600);
  });

  it('returns 400 with vendor code -400 for an undefined column', async () => {
    const res = await execute({ statement: `select nope from ${schema}.t` });
    expect(res.status).toBe(400);
    expectEnvelope(res, '42703', -400);
  });

  it('returns 400 with vendor code -205 for an unknown database', async () => {
    const res = await execute({ statement: 'select 1', database: 'no_such_database_x' });
    expect(res.status).toBe(400);
    expectEnvelope(res, '3D000', -205);
  });

  it.each([
    ['23505', 409, -530],
    ['40001', 409, -540],
    ['40P01', 409, -540],
    ['22012', 400, -520],
    ['P0001', 400, -599],
    ['XX001', 500, -103],
  ])(
    "answers SQLSTATE %s with its catalogue entry's HTTP %i and vendor code %i, keeping PostgreSQL's SQLSTATE and message",
    async (sqlState, http, vendorCode) => {
      const message = `raised ${sqlState} on purpose`;
      const res = await execute({
        statement: `do $$ begin raise exception using errcode = '${sqlState}', message = '${message}'; end $$`,
      });
      expect(res.status).toBe(http);
      expect(res.json.query_id).toBeDefined();
      expectEnvelope(res, sqlState, vendorCode);
      expect(res.json.status.reason).toBe(message);
    },
  );

  it('returns 403 with vendor code -700 when the role may not read the table', async () => {
    const role = randomName('e2e_noaccess');
    await db().query(`CREATE ROLE ${role} NOLOGIN`);
    const client = await db().connect();
    await grantToControl(client, role, e2eEnv().controlRole).finally(() => client.release());
    await db().query(`GRANT USAGE ON SCHEMA ${schema} TO ${role}`);
    const { hashPassword } = await import('@app/users');
    const password = 'pw-' + role;
    await db().query(
      'INSERT INTO sluice.users (username, password_hash, role) VALUES ($1, $2, $3)',
      [role, await hashPassword(password), role],
    );
    try {
      const token = await login(role, password);
      const res = await execute({ statement: `select * from ${schema}.t` }, { token });
      expect(res.status).toBe(403);
      expectEnvelope(res, '42501', -700);
    } finally {
      await db().query('DELETE FROM sluice.users WHERE username = $1', [role]);
      await db().query(`REVOKE ALL ON SCHEMA ${schema} FROM ${role}`);
      await db().query(`DROP ROLE ${role}`);
    }
  });

  it('returns 406 for an Accept it cannot produce', async () => {
    const res = await execute(
      { statement: 'select 1' },
      { headers: { accept: 'application/xml' } },
    );
    expect(res.status).toBe(406);
    expectEnvelope(res, '0A000', -105);
  });

  it('returns 415 for an unsupported Content-Type', async () => {
    const res = await execute(undefined, {
      raw: 'statement=select 1',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(res.status).toBe(415);
    expectEnvelope(res, '0A000', -107);
    expect(res.json.status.reason).toMatch(/application\/json or text\/plain/);
  });

  it('returns 404 in the envelope for an unknown path', async () => {
    const res = await request(undefined, { method: 'GET', path: '/v1/nothing-here' });
    expect(res.status).toBe(404);
    expectEnvelope(res, '42704', -104);
  });

  it('keeps serving after every error above', async () => {
    const res = await execute({ statement: 'select 1 as ok' });
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([[1]]);
  });
});

describe('errors Fastify raises before routing', () => {
  async function get(path: string, token?: string) {
    const res = await fetch(`${e2eEnv().baseUrl}${path}`, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
    });
    const text = await res.text();
    return { status: res.status, contentType: res.headers.get('content-type'), text };
  }

  it.each([
    ['a URL that does not decode, without credentials', '/%ff', false],
    ['a URL that does not decode, with credentials', '/v1/execute/%ff?statement=select%201', true],
    ['a bad escape in a route parameter', '/v1/queries/%e0%80/result', true],
  ])('answers 400 in the envelope for %s', async (_, path, authenticated) => {
    const res = await get(path, authenticated ? await login() : undefined);
    expect(res.status).toBe(400);
    expect(res.contentType).toMatch(/^application\/json/);
    const json = JSON.parse(res.text) as { status: Record<string, unknown> };
    expect(json).toEqual({ status: expect.any(Object) });
    expectEnvelope({ json }, '08P01', -100);
    expect(res.text).not.toMatch(/FST_|Bad Request|statusCode/);
  });

  it('answers 400 in the envelope for a route parameter longer than Fastify allows', async () => {
    const res = await get(`/v1/queries/${'a'.repeat(500)}`, await login());
    expect(res.status).toBe(400);
    const json = JSON.parse(res.text) as { status: Record<string, unknown> };
    expect(json).toEqual({ status: expect.any(Object) });
    expectEnvelope({ json }, '08P01', -100);
    expect(res.text).not.toMatch(/FST_|statusCode/);
  });
});
