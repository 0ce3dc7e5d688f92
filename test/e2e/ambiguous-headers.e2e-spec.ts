import { closeDb, db, e2eEnv, login, request } from './support/client';
import { RawAnswer, rawExchange, rawRequestText } from './support/raw';
import { randomName } from './support/service';
import { basic } from './support/users';

/**
 * A request that carries two credentials, two media types or two hosts is ambiguous: Node keeps
 * the first of two `Authorization` or `Content-Type` lines and drops the other unseen, and
 * passport takes the first word of a joined `Bearer a, Bearer b`. Such requests are refused with
 * 400 in the envelope, on every route, before anything looks at them.
 */

const schema = randomName('e2e_ambig');
const table = `${schema}.probe`;

async function rows(): Promise<string[]> {
  const { rows } = await db().query<{ x: string }>(`select x from ${table} order by ctid`);
  return rows.map((r) => r.x);
}

function raw(method: string, path: string, lines: string[], body = ''): Promise<RawAnswer> {
  return rawExchange(e2eEnv().baseUrl, rawRequestText(`${method} ${path} HTTP/1.1`, lines, body));
}

function expectAmbiguous(res: RawAnswer, what: RegExp): void {
  expect(res.status).toBe(400);
  expect(res.head).toMatch(/^content-type: application\/json/im);
  expect(res.head).not.toMatch(/^www-authenticate:/im);
  expect(res.json).toEqual({
    status: { reason: expect.stringMatching(what), sql_state: '08P01', vendor_code: -100 },
  });
}

const insert = (value: string) =>
  JSON.stringify({ statement: `insert into ${table} values ('${value}')` });

beforeAll(async () => {
  await db().query(`CREATE SCHEMA ${schema}`);
  await db().query(`CREATE TABLE ${table} (x text)`);
  await db().query(`GRANT USAGE ON SCHEMA ${schema} TO ${e2eEnv().adminRole}`);
  await db().query(`GRANT INSERT, SELECT ON ${table} TO ${e2eEnv().adminRole}`);
});

afterEach(async () => {
  await db().query(`DELETE FROM ${table}`);
});

afterAll(async () => {
  await db().query(`DROP SCHEMA ${schema} CASCADE`);
  await closeDb();
});

describe('Ambiguous headers', () => {
  it('refuses two Authorization headers on /v1/execute, the valid one first or last, and runs nothing', async () => {
    const valid = `Authorization: Bearer ${await login()}`;
    const { adminUser, adminPassword } = e2eEnv();
    const validBasic = `Authorization: ${basic(adminUser, adminPassword).authorization}`;
    for (const [first, second] of [
      [valid, 'Authorization: Bearer forged'],
      ['Authorization: Bearer forged', valid],
      [validBasic, `Authorization: ${basic(adminUser, 'bogus').authorization}`],
      [`Authorization: ${basic(adminUser, 'bogus').authorization}`, validBasic],
      [valid, validBasic],
      [valid, valid],
    ]) {
      const res = await raw(
        'POST',
        '/v1/execute',
        [first, second, 'Content-Type: application/json'],
        insert('two-headers'),
      );
      expectAmbiguous(res, /^ambiguous request: more than one Authorization header$/);
    }
    expect(await rows()).toEqual([]);
    // The control: the same request with the valid header alone runs.
    const one = await raw(
      'POST',
      '/v1/execute',
      [valid, 'Content-Type: application/json'],
      insert('one-header'),
    );
    expect(one.status).toBe(200);
    expect(await rows()).toEqual(['one-header']);
  });

  it('refuses them on every other route too: login, token_refresh, logout, queries, users, info, admin', async () => {
    const token = await login();
    const { adminUser, adminPassword } = e2eEnv();
    const pair = [`Authorization: Bearer ${token}`, 'Authorization: Bearer forged'];
    const json = 'Content-Type: application/json';
    const credentials = JSON.stringify({ username: adminUser, password: adminPassword });
    for (const [method, path, lines, body] of [
      ['POST', '/v1/login', [...pair, json], credentials],
      ['POST', '/v1/token_refresh', pair, ''],
      ['POST', '/v1/logout', pair, ''],
      ['GET', '/v1/queries', pair, ''],
      ['GET', '/v1/users', pair, ''],
      ['GET', '/v1/info', pair, ''],
      ['GET', '/admin/queues', pair, ''],
      ['GET', '/admin/api/queries', pair, ''],
      ['POST', '/admin/session', [...pair, json], credentials],
    ] as const) {
      const res = await raw(method, path, [...lines], body);
      expect([method, path, res.status]).toEqual([method, path, 400]);
      expectAmbiguous(res, /more than one Authorization header/);
      expect(res.head).not.toMatch(/^set-cookie:/im);
    }
    // Neither the refresh nor the logout happened: the token still works.
    const after = await request({ statement: 'select 1' }, { token });
    expect(after.status).toBe(200);
  });

  it('refuses one Authorization header that joins two credentials, whichever is valid', async () => {
    const token = await login();
    const { adminUser, adminPassword } = e2eEnv();
    const good = basic(adminUser, adminPassword).authorization;
    const bogus = basic(adminUser, 'bogus').authorization;
    for (const value of [
      `Bearer ${token}, Bearer forged`,
      `Bearer forged, Bearer ${token}`,
      `Bearer ${token},Bearer ${token}`,
      `Bearer ${token} forged`,
      // base64 decoders skip the comma: this one used to pass as the admin's password.
      `${good}, ${bogus}`,
      `${bogus}, ${good}`,
      `${good}, Bearer ${token}`,
    ]) {
      const res = await raw(
        'POST',
        '/v1/execute',
        [`Authorization: ${value}`, 'Content-Type: application/json'],
        insert('joined'),
      );
      expectAmbiguous(res, /Authorization header must hold exactly one credential/);
    }
    // fetch() joins repeated headers with ", " itself: the same answer.
    const headers = new Headers({ 'content-type': 'application/json' });
    headers.append('authorization', `Bearer ${token}`);
    headers.append('authorization', 'Bearer forged');
    const res = await fetch(`${e2eEnv().baseUrl}/v1/execute`, {
      method: 'POST',
      headers,
      body: insert('fetch'),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { status: { vendor_code: number } }).status.vendor_code).toBe(
      -100,
    );
    expect(await rows()).toEqual([]);
  });

  it('refuses two Content-Type headers with 400, not 415: which type the body is cannot be known', async () => {
    const auth = `Authorization: Bearer ${await login()}`;
    for (const types of [
      ['application/json', 'text/plain'],
      ['text/plain', 'application/json'],
      ['application/json', 'application/json'],
    ]) {
      const res = await raw(
        'POST',
        '/v1/execute',
        [auth, ...types.map((t) => `Content-Type: ${t}`)],
        insert('two-types'),
      );
      expectAmbiguous(res, /^ambiguous request: more than one Content-Type header$/);
    }
    expect(await rows()).toEqual([]);
  });

  it("answers repeated or conflicting Content-Length with 400 from Node's parser, in the envelope", async () => {
    const auth = `Authorization: Bearer ${await login()}`;
    const body = insert('lengths');
    const length = Buffer.byteLength(body);
    for (const lines of [
      [`Content-Length: ${length}`, `Content-Length: ${length + 5}`],
      [`Content-Length: ${length}`, `Content-Length: ${length}`],
      [`Content-Length: ${length}, ${length}`],
      [`Content-Length: ${length}`, 'Transfer-Encoding: chunked'],
    ]) {
      const res = await raw(
        'POST',
        '/v1/execute',
        [auth, 'Content-Type: application/json', ...lines],
        body,
      );
      expect(res.status).toBe(400);
      expect(res.json).toEqual({
        status: { reason: 'malformed HTTP request', sql_state: '08P01', vendor_code: -100 },
      });
    }
    expect(await rows()).toEqual([]);
  });

  it('refuses two Host headers (RFC 9112: 400)', async () => {
    const res = await rawExchange(
      e2eEnv().baseUrl,
      rawRequestText('GET /v1/info HTTP/1.1', ['Host: evil.example']),
    );
    expectAmbiguous(res, /^ambiguous request: more than one Host header$/);
  });

  it('refuses two Preferred-Encoding or two Preferred-Compression-Level headers, alike or not, and a Preferred-Encoding other than gzip or br', async () => {
    const auth = `Authorization: Bearer ${await login()}`;
    for (const lines of [
      ['Preferred-Encoding: gzip', 'Preferred-Encoding: gzip'],
      ['Preferred-Encoding: gzip', 'Preferred-Encoding: br'],
      ['Preferred-Compression-Level: 3', 'Preferred-Compression-Level: 3'],
      ['Preferred-Compression-Level: 1', 'Preferred-Compression-Level: 9'],
      ['Preferred-Encoding: deflate'],
    ]) {
      const res = await raw(
        'POST',
        '/v1/execute',
        [auth, 'Content-Type: application/json', 'Accept-Encoding: gzip, br', ...lines],
        insert('preferred'),
      );
      expectAmbiguous(res, /^Preferred-(Encoding|Compression-Level) must be/);
    }
    expect(await rows()).toEqual([]);
  });

  it('reads several Accept headers of execute as one list: the first type it can produce wins', async () => {
    const res = await raw(
      'POST',
      '/v1/execute',
      [
        `Authorization: Bearer ${await login()}`,
        'Content-Type: application/json',
        'Accept: text/html',
        'Accept: text/csv',
        'Accept: application/json',
      ],
      JSON.stringify({ statement: 'select 1 as one' }),
    );
    expect(res.status).toBe(200);
    expect(res.head).toMatch(/^content-type: text\/csv/im);
  });

  it('lets fields that may repeat through (Accept, Cookie)', async () => {
    const res = await raw('GET', '/v1/info', [
      'Accept: text/html',
      'Accept: application/json',
      'Cookie: a=1',
      'Cookie: b=2',
    ]);
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ name: expect.any(String) });
  });
});
