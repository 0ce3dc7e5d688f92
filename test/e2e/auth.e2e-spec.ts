import { createHmac } from 'node:crypto';
import { e2eEnv, execute, login, request } from './support/client';

function sign(claims: Record<string, unknown>, secret: string, alg = 'HS256'): string {
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const head = enc({ alg, typ: 'JWT' });
  const body = enc(claims);
  const sig =
    alg === 'none'
      ? ''
      : createHmac('sha256', secret).update(`${head}.${body}`).digest('base64url');
  return `${head}.${body}.${sig}`;
}

describe('authentication', () => {
  it('logs in and returns a token with its lifetime', async () => {
    const env = e2eEnv();
    const res = await request(
      { username: env.adminUser, password: env.adminPassword, database: env.defaultDatabase },
      { path: '/v1/login' },
    );
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      username: env.adminUser,
      database: env.defaultDatabase,
      expires_in: expect.any(Number),
      status: { reason: 'OK', sql_state: '00000', vendor_code: 0 },
    });
    expect(res.json.access_token.split('.')).toHaveLength(3);
  });

  it('returns 401 with vendor code -304 for a wrong password', async () => {
    const res = await request(
      { username: e2eEnv().adminUser, password: 'wrong' },
      { path: '/v1/login' },
    );
    expect(res.status).toBe(401);
    expect(res.json.status).toEqual({
      reason: expect.any(String),
      sql_state: '28P01',
      vendor_code: -304,
    });
  });

  it('returns 400 for a login without a password', async () => {
    const res = await request({ username: 'x' }, { path: '/v1/login' });
    expect(res.status).toBe(400);
  });

  it('returns 401 with WWW-Authenticate when the token is missing', async () => {
    const res = await request({ statement: 'select 1' });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer realm="sluice", Basic realm="sluice"');
    expect(res.json.status).toEqual({
      reason: expect.any(String),
      sql_state: '28000',
      vendor_code: -300,
    });
  });

  it('returns 401 with vendor code -300 and both challenges for another scheme', async () => {
    const res = await request(
      { statement: 'select 1' },
      { headers: { authorization: 'Digest username="a", realm="b"' } },
    );
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer realm="sluice", Basic realm="sluice"');
    expect(res.json.status).toMatchObject({ sql_state: '28000', vendor_code: -300 });
  });

  it.each([
    [{ username: 'u'.repeat(129), password: 'a-password' }, /username/],
    [{ username: 'u', password: 'p'.repeat(1025) }, /password/],
    [{ username: 'u', password: 'a-password', database: 'd'.repeat(64) }, /database/],
    [{ username: `u@${'d'.repeat(64)}`, password: 'a-password' }, /database/],
  ])(
    'refuses a login field past its limit with 400 and vendor code -100 (%#)',
    async (body, field) => {
      const res = await request(body, { path: '/v1/login' });
      expect(res.status).toBe(400);
      expect(res.json.status).toMatchObject({ sql_state: '08P01', vendor_code: -100 });
      expect(res.json.status.reason).toMatch(field);
    },
  );

  it('checks a login at the limits: a 128-character name and a 1024-character password', async () => {
    const res = await request(
      { username: 'u'.repeat(128), password: 'p'.repeat(1024) },
      { path: '/v1/login' },
    );
    expect(res.status).toBe(401);
    expect(res.json.status.vendor_code).toBe(-304);
  });

  it('refuses POST /v1/logout with Basic credentials with 400 and vendor code -100', async () => {
    const { adminUser, adminPassword } = e2eEnv();
    const basic = Buffer.from(`${adminUser}:${adminPassword}`).toString('base64');
    const res = await request(undefined, {
      path: '/v1/logout',
      headers: { authorization: `Basic ${basic}` },
    });
    expect(res.status).toBe(400);
    expect(res.json.status).toMatchObject({ sql_state: '08P01', vendor_code: -100 });
  });

  it('returns 401 with vendor code -301 for a token signed with another key', async () => {
    const token = sign(
      { sub: e2eEnv().adminUser, role: 'root', exp: Math.floor(Date.now() / 1000) + 60 },
      'not-the-secret',
    );
    const res = await request({ statement: 'select 1' }, { token });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/invalid_token/);
    expect(res.json.status.vendor_code).toBe(-301);
  });

  it('returns 401 for an unsigned token (alg none)', async () => {
    const token = sign(
      { sub: e2eEnv().adminUser, role: 'root', exp: Math.floor(Date.now() / 1000) + 60 },
      '',
      'none',
    );
    const res = await request({ statement: 'select 1' }, { token });
    expect(res.status).toBe(401);
    expect(res.json.status.vendor_code).toBe(-301);
  });

  it('returns 401 for a garbage token', async () => {
    const res = await request({ statement: 'select 1' }, { token: 'abc.def' });
    expect(res.status).toBe(401);
    expect(res.json.status.vendor_code).toBe(-301);
  });

  it('returns 401 with vendor code -302 when the token is expired', async () => {
    const token = sign(
      { sub: e2eEnv().adminUser, role: 'root', exp: Math.floor(Date.now() / 1000) - 10 },
      e2eEnv().jwtSecret,
    );
    const res = await request({ statement: 'select 1' }, { token });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/expired/);
    expect(res.json.status).toEqual({
      reason: 'token expired',
      sql_state: '28000',
      vendor_code: -302,
    });
  });

  it('accepts Authorization: Basic on execute', async () => {
    const env = e2eEnv();
    const basic = Buffer.from(`${env.adminUser}:${env.adminPassword}`).toString('base64');
    const res = await request(
      { statement: 'select 1 as one' },
      { headers: { authorization: `Basic ${basic}` } },
    );
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([[1]]);
  });

  it('returns 401 with vendor code -304 for wrong Basic credentials', async () => {
    const basic = Buffer.from(`${e2eEnv().adminUser}:nope`).toString('base64');
    const res = await request(
      { statement: 'select 1' },
      { headers: { authorization: `Basic ${basic}` } },
    );
    expect(res.status).toBe(401);
    expect(res.json.status.vendor_code).toBe(-304);
  });

  it('runs statements under the role of the user', async () => {
    const res = await execute({ statement: 'select current_user as u' }, { token: await login() });
    expect(res.status).toBe(200);
    expect(typeof res.json.data[0][0]).toBe('string');
  });
});
