import {
  HttpResult,
  createUser,
  db,
  e2eEnv,
  eventually,
  execute,
  grantSchema,
  login,
  request,
  usersDroppedAfterAll,
} from './support/client';
import { rawExchange, rawRequestText } from './support/raw';
import { basic, call, claimsOf, expectEnvelope } from './support/users';

/**
 * The admin pages' sign-in over plain HTTP: POST /admin/session sets a short-lived HttpOnly,
 * SameSite=Strict cookie scoped to /admin that the query view's data and the queue dashboard take;
 * no /admin answer ever challenges with Basic. The browser side is in admin-page.e2e-spec.ts.
 */

const EVIL = 'http://evil.example';
/** SLUICE_ADMIN_SESSION_SECONDS as the suite runs the service (its default). */
const SESSION_SECONDS = 900;
const users = usersDroppedAfterAll();

interface SignedIn {
  res: HttpResult;
  /** `sluice_admin=<token>`, as a browser would send it back. */
  cookie: string;
  token: string;
  setCookie: string;
}

async function signIn(
  username = e2eEnv().adminUser,
  password = e2eEnv().adminPassword,
  baseUrl = e2eEnv().baseUrl,
): Promise<SignedIn> {
  const res = await call(baseUrl, 'POST', '/admin/session', { username, password });
  expect(res.status).toBe(200);
  const setCookie = res.headers.getSetCookie();
  expect(setCookie).toHaveLength(1);
  const cookie = setCookie[0].split(';', 1)[0];
  return { res, cookie, token: cookie.slice(cookie.indexOf('=') + 1), setCookie: setCookie[0] };
}

function withCookie(
  cookie: string,
  method: string,
  path: string,
  extra: Record<string, string> = {},
  baseUrl = e2eEnv().baseUrl,
): Promise<HttpResult> {
  return call(baseUrl, method, path, undefined, { cookie, ...extra });
}

function expectNoBasic(res: HttpResult): void {
  expect(res.headers.get('www-authenticate') ?? '').not.toMatch(/basic/i);
}

describe('AdminSession', () => {
  it('signs in with a cookie that is HttpOnly, SameSite=Strict, scoped to /admin and short-lived', async () => {
    const { adminUser } = e2eEnv();
    const { res, setCookie, token } = await signIn();
    expect(res.json).toEqual({
      username: adminUser,
      admin: true,
      expires_in: SESSION_SECONDS,
      status: { reason: 'OK', sql_state: '00000', vendor_code: 0 },
    });
    expect(res.headers.get('cache-control')).toBe('no-store');
    const attributes = setCookie
      .split(';')
      .slice(1)
      .map((a) => a.trim());
    expect(attributes.sort()).toEqual(
      ['HttpOnly', 'Max-Age=900', 'Path=/admin', 'SameSite=Strict'].sort(),
    );
    // The token inside lives as long as the cookie, no longer, and is for /admin only.
    const claims = claimsOf(token);
    expect(claims).toMatchObject({ sub: adminUser, aud: 'sluice-admin', adm: true });
    expect((claims.exp as number) - (claims.iat as number)).toBe(SESSION_SECONDS);
    // The page never sees a token: the answer holds none.
    expect(res.text).not.toContain(token);
  });

  it('sets Secure when the request came over https (a TLS-terminating proxy says so)', async () => {
    const { adminUser, adminPassword, baseUrl } = e2eEnv();
    const res = await call(
      baseUrl,
      'POST',
      '/admin/session',
      { username: adminUser, password: adminPassword },
      { 'x-forwarded-proto': 'https' },
    );
    expect(res.status).toBe(200);
    expect(res.headers.getSetCookie()[0]).toMatch(/; Secure$/);
  });

  it('opens the query data, the session and the dashboard with the cookie, on every api', async () => {
    const { baseUrls, mode, adminUser } = e2eEnv();
    const { cookie } = await signIn();
    for (const baseUrl of baseUrls) {
      const session = await withCookie(cookie, 'GET', '/admin/session', {}, baseUrl);
      expect(session.status).toBe(200);
      expect(session.json).toMatchObject({ username: adminUser, admin: true });
      expect(session.json.expires_in).toBeGreaterThan(SESSION_SECONDS - 60);
      expect(session.json.expires_in).toBeLessThanOrEqual(SESSION_SECONDS);
      const queries = await withCookie(cookie, 'GET', '/admin/api/queries', {}, baseUrl);
      expect(queries.status).toBe(200);
      expect(Array.isArray(queries.json)).toBe(true);
      const dashboard = await withCookie(cookie, 'GET', '/admin/queues', {}, baseUrl);
      if (mode === 'cluster') {
        expect(dashboard.status).toBe(200);
        expect(dashboard.text).toContain('<title>Sluice queue</title>');
      } else {
        expect(dashboard.status).toBe(404);
        expect(dashboard.json.status.reason).toMatch(/standalone mode/);
      }
    }
  });

  it('refuses everything under /admin without the cookie, never with a Basic challenge', async () => {
    for (const [method, path] of [
      ['GET', '/admin/session'],
      ['GET', '/admin/api/queries'],
      ['DELETE', '/admin/api/queries/00000000-0000-4000-8000-000000000000'],
      ['GET', '/admin/queues'],
      ['GET', '/admin/queues/api/queues'],
    ]) {
      const res = await call(e2eEnv().baseUrl, method, path);
      expect([method, path, res.status]).toEqual([method, path, 401]);
      expectEnvelope(res, '28000', -300);
      expect(res.headers.get('www-authenticate')).toBe('Bearer realm="sluice admin"');
    }
  });

  it('refuses a sign-in body that is not {username, password} with 400 and no cookie', async () => {
    const { adminUser, adminPassword, baseUrl } = e2eEnv();
    for (const body of [
      { username: adminUser },
      { password: adminPassword },
      // A login's database has no place here: the admin pages pick none.
      { username: adminUser, password: adminPassword, database: 'postgres' },
      { username: adminUser, password: adminPassword, admin: true },
    ]) {
      const res = await call(baseUrl, 'POST', '/admin/session', body);
      expect([body, res.status]).toEqual([body, 400]);
      expect(res.json.status.vendor_code).toBe(-100);
      expect(res.headers.getSetCookie()).toEqual([]);
    }
  });

  it('refuses a wrong password like /v1/login (401), with no Basic challenge and no cookie', async () => {
    const someone = await createUser('e2e_adm_wrong');
    users.push(someone.username);
    const res = await call(e2eEnv().baseUrl, 'POST', '/admin/session', {
      username: someone.username,
      password: 'not-the-password',
    });
    expect(res.status).toBe(401);
    expectEnvelope(res, '28P01', -304);
    expectNoBasic(res);
    expect(res.headers.getSetCookie()).toEqual([]);
  });

  it('is throttled by the login lockout: locked out after SLUICE_LOGIN_MAX_FAILURES, right password or not', async () => {
    const someone = await createUser('e2e_adm_lock');
    users.push(someone.username);
    for (let i = 0; i < 5; i++) {
      const res = await call(e2eEnv().baseUrl, 'POST', '/admin/session', {
        username: someone.username,
        password: 'wrong-password',
      });
      expect(res.status).toBe(401);
    }
    const locked = await call(e2eEnv().baseUrl, 'POST', '/admin/session', {
      username: someone.username,
      password: `pw-${someone.username}`,
    });
    expect(locked.status).toBe(429);
    expectEnvelope(locked, '08004', -305);
    expect(locked.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(locked.headers.getSetCookie()).toEqual([]);
  });

  it('lets a user who is not an administrator see their own queries, not the dashboard', async () => {
    const plain = await createUser('e2e_adm_plain');
    users.push(plain.username);
    const { res, cookie } = await signIn(plain.username, `pw-${plain.username}`);
    expect(res.json).toMatchObject({ username: plain.username, admin: false });
    const queries = await withCookie(cookie, 'GET', '/admin/api/queries');
    expect(queries.status).toBe(200);
    expect((queries.json as { owner: string }[]).every((q) => q.owner === plain.username)).toBe(
      true,
    );
    const dashboard = await withCookie(cookie, 'GET', '/admin/queues');
    expect(dashboard.status).toBe(403);
    expectEnvelope(dashboard, '42501', -700);
    // The charts are the whole service's traffic: administrators only.
    const stats = await withCookie(cookie, 'GET', '/admin/api/stats');
    expect(stats.status).toBe(403);
    expectEnvelope(stats, '42501', -700);
  });

  it('keeps the cookie token and Bearer tokens apart: neither works as the other', async () => {
    const { token } = await signIn();
    const asBearer = await call(
      e2eEnv().baseUrl,
      'POST',
      '/v1/execute',
      { statement: 'select 1' },
      { authorization: `Bearer ${token}` },
    );
    expect(asBearer.status).toBe(401);
    expectEnvelope(asBearer, '28000', -301);
    const bearer = await login();
    const asCookie = await withCookie(`sluice_admin=${bearer}`, 'GET', '/admin/api/queries');
    expect(asCookie.status).toBe(401);
    expectEnvelope(asCookie, '28000', -301);
    expectNoBasic(asCookie);
  });

  it('refuses ambiguous credentials: the cookie twice, or the cookie and an Authorization header', async () => {
    const { adminUser, adminPassword } = e2eEnv();
    const { cookie } = await signIn();
    const ambiguous: Record<string, string>[] = [
      { cookie: `${cookie}; sluice_admin=forged.token.sig` },
      { cookie: `sluice_admin=forged.token.sig; ${cookie}` },
      { cookie, authorization: `Bearer ${await login()}` },
      { cookie, ...basic(adminUser, adminPassword) },
    ];
    for (const headers of ambiguous) {
      for (const path of ['/admin/api/queries', '/admin/queues', '/admin/session']) {
        const res = await call(e2eEnv().baseUrl, 'GET', path, undefined, headers);
        expect([path, res.status]).toEqual([path, 400]);
        expectEnvelope(res, '08P01', -100);
        expect(res.json.status.reason).toMatch(/^ambiguous request/);
      }
    }
  });

  it('refuses a request from another site that carries the cookie, reads included', async () => {
    const { cookie } = await signIn();
    const before = await withCookie(cookie, 'GET', '/admin/api/queries');
    expect(before.status).toBe(200);
    const foreigners: Record<string, string>[] = [
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
      { origin: EVIL },
    ];
    for (const foreign of foreigners) {
      for (const [method, path] of [
        ['GET', '/admin/api/queries'],
        ['GET', '/admin/session'],
        ['GET', '/admin/queues'],
        ['GET', '/admin/queues/api/queues'],
        ['DELETE', '/admin/api/queries/00000000-0000-4000-8000-000000000000'],
        ['DELETE', '/admin/session'],
      ]) {
        const res = await withCookie(cookie, method, path, foreign);
        expect([method, path, res.status]).toEqual([method, path, 403]);
        expectEnvelope(res, '42501', -703);
      }
    }
    // None of them signed the browser out: the cookie still works from the service's own pages.
    const own = await withCookie(cookie, 'GET', '/admin/api/queries', {
      'sec-fetch-site': 'same-origin',
      origin: e2eEnv().baseUrl,
    });
    expect(own.status).toBe(200);
  });

  it('refuses a sign-in from another site without counting it as a failed login', async () => {
    const { adminUser, adminPassword, baseUrl } = e2eEnv();
    const res = await call(
      baseUrl,
      'POST',
      '/admin/session',
      { username: adminUser, password: adminPassword },
      { origin: EVIL },
    );
    expect(res.status).toBe(403);
    expectEnvelope(res, '42501', -703);
    expect(res.headers.getSetCookie()).toEqual([]);
  });

  it('signs out: the cookie is cleared, and its token stops working on every api', async () => {
    const { baseUrls } = e2eEnv();
    const { cookie } = await signIn();
    const out = await withCookie(cookie, 'DELETE', '/admin/session');
    expect(out.status).toBe(200);
    expect(out.json).toEqual({
      status: { reason: 'signed out', sql_state: '00000', vendor_code: 0 },
    });
    expect(out.headers.getSetCookie()).toEqual([
      'sluice_admin=; Path=/admin; Max-Age=0; HttpOnly; SameSite=Strict',
    ]);
    // Replayed after sign-out (a copy taken before): revoked everywhere — at once on the api that
    // signed out, within moments on the others (PostgreSQL's NOTIFY).
    for (const baseUrl of baseUrls) {
      const res = await eventually(async () => {
        const r = await withCookie(cookie, 'GET', '/admin/api/queries', {}, baseUrl);
        return r.status === 200 ? undefined : r;
      }, 2_000);
      expect(res.status).toBe(401);
      expectEnvelope(res, '28000', -303);
      expectNoBasic(res);
    }
    // Signing out without a (valid) cookie still clears it.
    const again = await withCookie(cookie, 'DELETE', '/admin/session');
    expect(again.status).toBe(200);
    expect(again.headers.getSetCookie()[0]).toMatch(/^sluice_admin=; Path=\/admin; Max-Age=0/);
  });

  it('sends the cookie over raw HTTP exactly as a browser would (Cookie header among others)', async () => {
    const { cookie } = await signIn();
    const res = await rawExchange(
      e2eEnv().baseUrl,
      rawRequestText('GET /admin/session HTTP/1.1', [
        'Cookie: theme=dark',
        `Cookie: ${cookie}`,
        'Sec-Fetch-Site: same-origin',
      ]),
    );
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ username: e2eEnv().adminUser });
  });
});

describe('failure reasons of queries with parameter values', () => {
  const schema = `e2e_reasons_${Math.random().toString(16).slice(2, 10)}`;
  const secret = `sEcReT${Math.random().toString(16).slice(2, 10)}`;
  const key = 900_000_000 + Math.floor(Math.random() * 99_999_999);
  /** What the statements below fail with, as their owner sees it (PostgreSQL's own messages). */
  const cases = [
    { statement: 'select {v}::int', params: { v: secret }, reason: secret },
    // Passed through a function first: the value the reason quotes is not the one bound.
    { statement: 'select upper({v})::int', params: { v: secret }, reason: secret.toUpperCase() },
    {
      statement: `insert into ${schema}.t values ({k}), ({k})`,
      params: { k: key },
      reason: 'duplicate key value violates unique constraint',
    },
  ];
  let owner: { username: string; token: string };
  const failed: string[] = [];
  let plain: string;

  beforeAll(async () => {
    await db().query(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.t (a int PRIMARY KEY)`);
    await grantSchema(schema);
    owner = await createUser('e2e_adm_values');
    users.push(owner.username);
    for (const { statement, params, reason } of cases) {
      const res = await execute({ statement, params }, { token: owner.token });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.json.status.reason).toContain(reason);
      failed.push(res.json.query_id as string);
    }
    // Without values, the reason quotes only what the statement holds.
    const res = await execute({ statement: `select '${secret}x'::int` }, { token: owner.token });
    expect(res.json.status.reason).toContain(`${secret}x`);
    plain = res.json.query_id as string;
  });

  afterAll(async () => {
    await db().query(`DROP SCHEMA ${schema} CASCADE`);
  });

  /** Whatever an administrator is answered holds neither the values nor what they became. */
  function expectNoValues(text: string): void {
    expect(text.toLowerCase()).not.toContain(secret.toLowerCase());
    expect(text).not.toContain(String(key));
  }

  function expectWithheld(info: { query_id: string; status: Record<string, unknown> }): void {
    const i = failed.indexOf(info.query_id);
    expect(info.status).toEqual({
      reason:
        i === 2
          ? expect.stringMatching(/^constraint violation \(/)
          : expect.stringMatching(/^data exception \(/),
      sql_state: i === 2 ? '23505' : '22P02',
      vendor_code: i === 2 ? -530 : -520,
    });
  }

  it('are shown to administrators as their kind of error only, in /v1/queries and on the admin page', async () => {
    const admin = await login();
    const list = await request(undefined, { method: 'GET', path: '/v1/queries', token: admin });
    const { cookie } = await signIn();
    const page = await withCookie(cookie, 'GET', '/admin/api/queries');
    for (const res of [list, page]) {
      expect(res.status).toBe(200);
      const listed = res.json as { query_id: string; status: Record<string, unknown> }[];
      const mine = listed.filter((q) => failed.includes(q.query_id));
      expect(mine).toHaveLength(failed.length);
      expectNoValues(JSON.stringify(mine));
      mine.forEach(expectWithheld);
      // A query without values keeps its reason.
      expect(JSON.stringify(listed.find((q) => q.query_id === plain))).toContain(`${secret}x`);
    }
    for (const id of failed) {
      const one = await request(undefined, {
        method: 'GET',
        path: `/v1/queries/${id}`,
        token: admin,
      });
      expectNoValues(one.text);
      expectWithheld(one.json);
    }
  });

  it('are withheld on the queue dashboard (cluster; standalone mode has none)', async () => {
    if (e2eEnv().mode !== 'cluster') return;
    const { cookie } = await signIn();
    for (const id of failed) {
      const job = await withCookie(cookie, 'GET', `/admin/queues/api/queues/execute/${id}`);
      expect(job.status).toBe(200);
      expect(job.json.job.returnValue.status.vendor_code).toBeLessThan(0);
      expectNoValues(job.text);
    }
  });

  it('are shown whole to the query’s owner, on the admin page too', async () => {
    const { cookie } = await signIn(owner.username, `pw-${owner.username}`);
    const page = await withCookie(cookie, 'GET', '/admin/api/queries');
    for (const [i, id] of failed.entries()) {
      const one = await request(undefined, {
        method: 'GET',
        path: `/v1/queries/${id}`,
        token: owner.token,
      });
      expect(one.json.status.reason).toContain(cases[i].reason);
      const listed = (page.json as { query_id: string; status: { reason: string } }[]).find(
        (q) => q.query_id === id,
      );
      expect(listed?.status.reason).toContain(cases[i].reason);
    }
  });
});
