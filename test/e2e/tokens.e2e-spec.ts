import Redis from 'ioredis';
import { createHmac, randomUUID } from 'node:crypto';
import { HttpResult, closeDb, db, e2eEnv, eventually } from './support/client';
import { ExtraApi, startExtraApi } from './support/extra-api';
import { randomName } from './support/service';
import {
  TestUser,
  adminCall,
  basic,
  call,
  claimsOf,
  createRole,
  createUser,
  dropRole,
  executeAs,
  expectEnvelope,
  freshLogin,
  signToken,
} from './support/users';

const roles: string[] = [];
const users: string[] = [];
let second: ExtraApi;

async function user(): Promise<TestUser> {
  const role = await createRole();
  roles.push(role);
  const made = await createUser({ role });
  users.push(made.username);
  return made;
}

async function tokenOf(u: TestUser, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await freshLogin(u.username, u.password, extra);
  expect(res.status).toBe(200);
  return res.json.access_token as string;
}

function post(path: string, token: string, baseUrl = e2eEnv().baseUrl): Promise<HttpResult> {
  return call(baseUrl, 'POST', path, undefined, { authorization: `Bearer ${token}` });
}

/** Asserts a 401 whose challenge names a Bearer token and the envelope's vendor code. */
function expectUnauthorized(res: HttpResult, vendorCode: number): void {
  expect(res.status).toBe(401);
  expect(res.headers.get('www-authenticate')).toMatch(/^Bearer realm="sluice"/);
  expectEnvelope(res, '28000', vendorCode);
}

async function generationOf(username: string): Promise<string> {
  const { rows } = await db().query<{ g: string }>(
    'SELECT token_generation AS g FROM sluice.users WHERE username = $1',
    [username],
  );
  return rows[0].g;
}

beforeAll(async () => {
  second = await startExtraApi();
});

afterAll(async () => {
  await second?.stop();
  await db().query('DELETE FROM sluice.users WHERE username = ANY($1)', [users]);
  for (const role of roles) await dropRole(role);
  await closeDb();
});

describe('POST /v1/token_refresh', () => {
  it('returns a new token for a valid one and revokes the old one', async () => {
    const u = await user();
    const old = await tokenOf(u, { database: e2eEnv().defaultDatabase });
    const res = await post('/v1/token_refresh', old);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      access_token: expect.any(String),
      username: u.username,
      database: e2eEnv().defaultDatabase,
      expires_in: expect.any(Number),
      status: { reason: 'OK', sql_state: '00000', vendor_code: 0 },
    });
    const fresh = res.json.access_token as string;
    expect(fresh).not.toBe(old);
    // The session keeps its start: refreshing cannot extend it past the refresh window.
    expect(claimsOf(fresh).auth_time).toBe(claimsOf(old).auth_time);
    expect(claimsOf(fresh).jti).not.toBe(claimsOf(old).jti);
    expect((await executeAs(fresh, { statement: 'select 1' })).status).toBe(200);
    expectUnauthorized(await executeAs(old, { statement: 'select 1' }), -303);
    expectUnauthorized(await post('/v1/token_refresh', old), -303);
  });

  it('gives a token refreshed many times at once one successor, on every api', async () => {
    const u = await user();
    const old = await tokenOf(u);
    const apis = [e2eEnv().baseUrl, second.baseUrl];
    const refreshes = await Promise.all(
      Array.from({ length: 10 }, (_, i) => post('/v1/token_refresh', old, apis[i % 2])),
    );
    const granted = refreshes.filter((res) => res.status === 200);
    expect(granted).toHaveLength(1);
    for (const res of refreshes.filter((r) => r.status !== 200)) expectUnauthorized(res, -303);
    // Its logout leaves no other successor working.
    const fresh = granted[0].json.access_token as string;
    expect((await post('/v1/logout', fresh)).status).toBe(200);
    expectUnauthorized(await executeAs(fresh, { statement: 'select 1' }), -303);
  });

  it('refuses a token whose session began before the refresh window', async () => {
    const u = await user();
    const now = Math.floor(Date.now() / 1000);
    const token = signToken(
      {
        sub: u.username,
        role: u.role,
        jti: randomUUID(),
        gen: await generationOf(u.username),
        auth_time: now - 2 * 86400,
        iat: now - 60,
        exp: now + 600,
      },
      e2eEnv().jwtSecret,
    );
    // Still a valid token for statements ...
    expect((await executeAs(token, { statement: 'select 1' })).status).toBe(200);
    // ... but its session may not be extended.
    const res = await post('/v1/token_refresh', token);
    expectUnauthorized(res, -302);
    expect(res.json.status.reason).toMatch(/refresh window/);
  });

  it('refuses an expired token, Basic credentials and no credentials', async () => {
    const u = await user();
    const now = Math.floor(Date.now() / 1000);
    const expired = signToken(
      {
        sub: u.username,
        role: u.role,
        jti: randomUUID(),
        gen: await generationOf(u.username),
        auth_time: now - 100,
        exp: now - 10,
      },
      e2eEnv().jwtSecret,
    );
    expectUnauthorized(await post('/v1/token_refresh', expired), -302);
    const viaBasic = await call(
      e2eEnv().baseUrl,
      'POST',
      '/v1/token_refresh',
      undefined,
      basic(u.username, u.password),
    );
    expect(viaBasic.status).toBe(400);
    expectEnvelope(viaBasic, '08P01', -100);
    const none = await call(e2eEnv().baseUrl, 'POST', '/v1/token_refresh');
    expect(none.status).toBe(401);
    expectEnvelope(none, '28000', -300);
  });
});

describe('a login that names no database', () => {
  it('answers, and signs into the token, the default database; token_refresh keeps it', async () => {
    const { defaultDatabase } = e2eEnv();
    const u = await user();
    const res = await freshLogin(u.username, u.password);
    expect(res.status).toBe(200);
    expect(res.json.database).toBe(defaultDatabase);
    const token = res.json.access_token as string;
    expect(claimsOf(token).db).toBe(defaultDatabase);
    const refreshed = await post('/v1/token_refresh', token);
    expect(refreshed.status).toBe(200);
    expect(refreshed.json.database).toBe(defaultDatabase);
    const fresh = refreshed.json.access_token as string;
    expect(claimsOf(fresh).db).toBe(defaultDatabase);
    const where = await executeAs(fresh, { statement: 'select current_database()' });
    expect(where.json.data).toEqual([[defaultDatabase]]);
  });

  it('keeps a named database through token_refresh', async () => {
    const u = await user();
    const token = await tokenOf(u, { database: 'postgres' });
    const refreshed = await post('/v1/token_refresh', token);
    expect(refreshed.status).toBe(200);
    expect(refreshed.json.database).toBe('postgres');
    expect(claimsOf(refreshed.json.access_token as string).db).toBe('postgres');
  });

  it('gives a token issued without a db claim the default database when it is refreshed', async () => {
    const u = await user();
    const now = Math.floor(Date.now() / 1000);
    const old = signToken(
      {
        sub: u.username,
        role: u.role,
        jti: randomUUID(),
        gen: await generationOf(u.username),
        auth_time: now - 10,
        iat: now - 10,
        exp: now + 600,
      },
      e2eEnv().jwtSecret,
    );
    const res = await post('/v1/token_refresh', old);
    expect(res.status).toBe(200);
    expect(res.json.database).toBe(e2eEnv().defaultDatabase);
    expect(claimsOf(res.json.access_token as string).db).toBe(e2eEnv().defaultDatabase);
  });
});

describe('POST /v1/logout', () => {
  it('stops the token at once on the api that logged it out, within moments on every other, and only that token', async () => {
    const u = await user();
    const token = await tokenOf(u);
    const other = await tokenOf(u);
    // Both processes accept it (and have its user cached).
    expect((await executeAs(token, { statement: 'select 1' })).status).toBe(200);
    expect((await executeAs(token, { statement: 'select 1' }, second.baseUrl)).status).toBe(200);

    const res = await post('/v1/logout', token);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      status: { reason: 'logged out', sql_state: '00000', vendor_code: 0 },
    });
    expectUnauthorized(await executeAs(token, { statement: 'select 1' }), -303);
    // Another process hears of it by PostgreSQL's NOTIFY, sent when the revocation commits.
    const elsewhere = await eventually(async () => {
      const r = await executeAs(token, { statement: 'select 1' }, second.baseUrl);
      return r.status === 200 ? undefined : r;
    }, 2_000);
    expectUnauthorized(elsewhere, -303);
    expectUnauthorized(await post('/v1/logout', token), -303);
    expect((await executeAs(other, { statement: 'select 1' }, second.baseUrl)).status).toBe(200);

    const { rows } = await db().query<{ exp: number; username: string }>(
      `SELECT extract(epoch FROM expires_at)::int AS exp, username
         FROM sluice.revoked_tokens WHERE jti = $1`,
      [claimsOf(token).jti],
    );
    expect(rows).toEqual([{ exp: claimsOf(token).exp, username: u.username }]);
  });

  it('is honoured by an api process started after the logout', async () => {
    const u = await user();
    const token = await tokenOf(u);
    expect((await post('/v1/logout', token)).status).toBe(200);
    const late = await startExtraApi();
    try {
      expectUnauthorized(await executeAs(token, { statement: 'select 1' }, late.baseUrl), -303);
    } finally {
      await late.stop();
    }
  });
});

describe('forged revocation notifications', () => {
  /** What an api's /metrics says of the revocations it holds in memory. */
  async function cachedRevocations(baseUrl = e2eEnv().baseUrl): Promise<number> {
    const res = await call(baseUrl, 'GET', '/metrics');
    const line = /^sluice_revoked_tokens_cached\{[^}]*\} (\d+)$/m.exec(res.text);
    if (!line) throw new Error('no sluice_revoked_tokens_cached in /metrics');
    return Number(line[1]);
  }

  /** Logs a token out on the second api and waits until the first refuses it too. */
  async function heardEverything(u: TestUser): Promise<void> {
    const marker = await tokenOf(u);
    expect((await post('/v1/logout', marker, second.baseUrl)).status).toBe(200);
    await eventually(async () => {
      const r = await executeAs(marker, { statement: 'select 1' });
      return r.status === 401 ? r : undefined;
    }, 5_000);
  }

  it('keep nothing of a flood of big payloads a read-only user sends, and revoke no live token', async () => {
    const role = await createRole();
    roles.push(role);
    const attacker = await createUser({ role, read_only: true });
    users.push(attacker.username);
    const attackerToken = await tokenOf(attacker);
    const victim = await user();
    const victimToken = await tokenOf(victim);
    expect((await executeAs(victimToken, { statement: 'select 1' })).status).toBe(200);
    const before = await cachedRevocations();

    const flood = await executeAs(attackerToken, {
      statement: `select count(pg_notify('sluice_events', json_build_object('kind', 'revoked',
          'jti', g::text || repeat('x', 7800), 'exp', 9e15)::text))
        from generate_series(1, 3000) g`,
    });
    expect(flood.status).toBe(200);
    // The victim's own token id, named as revoked with an expiry far away.
    const forged = await executeAs(attackerToken, {
      statement: `select pg_notify('sluice_events', json_build_object('kind', 'revoked',
          'jti', {jti}::text, 'exp', 9e15)::text)`,
      params: { jti: claimsOf(victimToken).jti },
    });
    expect(forged.status).toBe(200);
    // A genuine logout committed after them: once it is heard, so were they.
    await heardEverything(victim);

    // Only genuine logouts (the marker's, and any other test's meanwhile) are held.
    expect(await cachedRevocations()).toBeLessThan(before + 50);
    expect((await executeAs(victimToken, { statement: 'select 1' })).status).toBe(200);
    expect((await executeAs(victimToken, { statement: 'select 1' }, second.baseUrl)).status).toBe(
      200,
    );
  });
});

describe('tokens that must not work', () => {
  let u: TestUser;
  let good: string;

  beforeAll(async () => {
    u = await user();
    good = await tokenOf(u);
  });

  function claims(extra: Record<string, unknown> = {}): Record<string, unknown> {
    return { ...claimsOf(good), jti: randomUUID(), ...extra };
  }

  it.each([
    ['signed with another key', () => signToken(claims(), 'not-the-secret-at-all')],
    ['unsigned (alg none)', () => signToken(claims(), '', { alg: 'none', typ: 'JWT' })],
    [
      'signed with the secret but HS512',
      () => signToken(claims(), e2eEnv().jwtSecret, { alg: 'HS512', typ: 'JWT' }),
    ],
    [
      'with altered claims (another user, same signature)',
      () => {
        const [head, , sig] = good.split('.');
        const body = Buffer.from(
          JSON.stringify({ ...claimsOf(good), sub: e2eEnv().adminUser, adm: true }),
        ).toString('base64url');
        return `${head}.${body}.${sig}`;
      },
    ],
    [
      'with an altered role claim',
      () => {
        const [head, , sig] = good.split('.');
        const body = Buffer.from(JSON.stringify({ ...claimsOf(good), role: 'postgres' })).toString(
          'base64url',
        );
        return `${head}.${body}.${sig}`;
      },
    ],
    [
      'signed with the secret but without a token id',
      () => signToken(claims({ jti: undefined }), e2eEnv().jwtSecret),
    ],
    [
      'signed with the secret but from an older password',
      () => signToken(claims({ gen: randomUUID() }), e2eEnv().jwtSecret),
    ],
    ['garbage', () => 'not.a.token'],
    ['empty', () => ''],
  ])('refuses a token %s with 401 and vendor code -301', async (_, make) => {
    const res = await executeAs(make(), { statement: 'select 1' });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer realm="sluice"/);
    expectEnvelope(res, '28000', -301);
  });

  it('refuses an expired token with 401 and vendor code -302', async () => {
    const now = Math.floor(Date.now() / 1000);
    const res = await executeAs(signToken(claims({ exp: now - 5 }), e2eEnv().jwtSecret), {
      statement: 'select 1',
    });
    expectUnauthorized(res, -302);
    expect(res.headers.get('www-authenticate')).toMatch(/error="invalid_token"/);
  });

  it('refuses the token of a disabled user, within moments on every api process', async () => {
    const v = await user();
    const token = await tokenOf(v);
    expect((await executeAs(token, { statement: 'select 1' }, second.baseUrl)).status).toBe(200);
    await adminCall('PATCH', `/v1/users/${v.username}`, { enabled: false });
    // Processes other than the one that made the change hear of it by NOTIFY, within moments.
    for (const base of [second.baseUrl, ...e2eEnv().baseUrls]) {
      const refused = await eventually(async () => {
        const r = await executeAs(token, { statement: 'select 1' }, base);
        return r.status === 200 ? undefined : r;
      }, 2_000);
      expectUnauthorized(refused, -301);
    }
  });

  it('still accepts the good token after all of that', async () => {
    expect((await executeAs(good, { statement: 'select 1' })).status).toBe(200);
  });
});

describe('a rotation of SLUICE_JWT_SECRET', () => {
  /** An api as it runs mid-rotation: a new secret, the suite's own as the previous one. */
  const NEW_SECRET = `rotated-${randomUUID()}`;
  let rotated: ExtraApi;
  let u: TestUser;
  let old: string;

  /** Whether `token` is HS256 and its HMAC is `secret`'s. */
  function signedWith(token: string, secret: string): boolean {
    const [head, body, sig] = token.split('.');
    const header = JSON.parse(Buffer.from(head, 'base64url').toString()) as { alg?: string };
    const mac = createHmac('sha256', secret).update(`${head}.${body}`).digest('base64url');
    return header.alg === 'HS256' && sig === mac;
  }

  beforeAll(async () => {
    rotated = await startExtraApi({
      SLUICE_JWT_SECRET: NEW_SECRET,
      SLUICE_JWT_PREVIOUS_SECRET: e2eEnv().jwtSecret,
    });
    u = await user();
    old = await tokenOf(u);
    expect(signedWith(old, e2eEnv().jwtSecret)).toBe(true);
  });

  afterAll(async () => {
    await rotated?.stop();
  });

  it('takes a token signed with the previous secret', async () => {
    const res = await executeAs(old, { statement: 'select 1' }, rotated.baseUrl);
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([[1]]);
  });

  it("takes an admin pages' cookie signed with the previous secret", async () => {
    const { adminUser, adminPassword, baseUrl } = e2eEnv();
    const signIn = await call(baseUrl, 'POST', '/admin/session', {
      username: adminUser,
      password: adminPassword,
    });
    expect(signIn.status).toBe(200);
    const cookie = signIn.headers.getSetCookie()[0].split(';', 1)[0];
    expect(signedWith(cookie.slice(cookie.indexOf('=') + 1), e2eEnv().jwtSecret)).toBe(true);
    const queries = await call(rotated.baseUrl, 'GET', '/admin/api/queries', undefined, {
      cookie,
    });
    expect(queries.status).toBe(200);
  });

  it('refreshes it into a token signed with the new secret, and logs in with the new secret only', async () => {
    const v = await user();
    const before = await tokenOf(v);
    const res = await post('/v1/token_refresh', before, rotated.baseUrl);
    expect(res.status).toBe(200);
    const refreshed = res.json.access_token as string;
    expect(signedWith(refreshed, NEW_SECRET)).toBe(true);
    expect(claimsOf(refreshed).sub).toBe(v.username);
    expect((await executeAs(refreshed, { statement: 'select 1' }, rotated.baseUrl)).status).toBe(
      200,
    );
    const login = await freshLogin(v.username, v.password, {}, rotated.baseUrl);
    expect(login.status).toBe(200);
    expect(signedWith(login.json.access_token as string, NEW_SECRET)).toBe(true);
    const admin = await call(rotated.baseUrl, 'POST', '/admin/session', {
      username: e2eEnv().adminUser,
      password: e2eEnv().adminPassword,
    });
    const cookie = admin.headers.getSetCookie()[0].split(';', 1)[0];
    expect(signedWith(cookie.slice(cookie.indexOf('=') + 1), NEW_SECRET)).toBe(true);
  });

  it('refuses a token signed with a third secret', async () => {
    const third = signToken({ ...claimsOf(old), jti: randomUUID() }, `third-${randomUUID()}`);
    const res = await executeAs(third, { statement: 'select 1' }, rotated.baseUrl);
    expectUnauthorized(res, -301);
  });

  it('is refused, by an api that does not name its secret as the previous one, with 401', async () => {
    // The suite's api: SLUICE_JWT_SECRET is the rotated api's previous one, and no previous.
    const v = await user();
    const newer = (await freshLogin(v.username, v.password, {}, rotated.baseUrl)).json
      .access_token as string;
    expectUnauthorized(await executeAs(newer, { statement: 'select 1' }), -301);
    expectUnauthorized(await post('/v1/token_refresh', newer), -301);
  });
});

describe('login by user@database', () => {
  it('makes the database the default of the token', async () => {
    const u = await user();
    const res = await freshLogin(`${u.username}@postgres`, u.password);
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ username: u.username, database: 'postgres' });
    expect(claimsOf(res.json.access_token as string).db).toBe('postgres');
    const where = await executeAs(res.json.access_token as string, {
      statement: 'select current_database()',
    });
    expect(where.json.data).toEqual([['postgres']]);
  });

  it('takes user@database in Basic credentials too', async () => {
    const u = await user();
    const res = await call(
      e2eEnv().baseUrl,
      'POST',
      '/v1/execute',
      { statement: 'select current_database()' },
      basic(`${u.username}@postgres`, u.password),
    );
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([['postgres']]);
  });

  it('refuses a database after @ that differs from the one in the body, or is empty', async () => {
    const u = await user();
    const differ = await freshLogin(`${u.username}@postgres`, u.password, {
      database: e2eEnv().defaultDatabase,
    });
    expect(differ.status).toBe(400);
    expectEnvelope(differ, '08P01', -100);
    expect((await freshLogin(`${u.username}@`, u.password)).status).toBe(400);
  });
});

describe('failed logins', () => {
  it('are slowed down per user: 429 with Retry-After, even for the right password', async () => {
    const u = await user();
    const bystander = await user();
    for (let i = 0; i < 5; i++) {
      expect((await freshLogin(u.username, `wrong-${i}`)).status).toBe(401);
    }
    for (const res of [
      await freshLogin(u.username, u.password),
      await call(
        e2eEnv().baseUrl,
        'POST',
        '/v1/execute',
        { statement: 'select 1' },
        basic(u.username, u.password),
      ),
    ]) {
      expect(res.status).toBe(429);
      expectEnvelope(res, '08004', -305);
      const retry = Number(res.headers.get('retry-after'));
      expect(retry).toBeGreaterThanOrEqual(1);
      expect(retry).toBeLessThanOrEqual(60);
    }
    // Another user from the same address is not locked out.
    expect((await freshLogin(bystander.username, bystander.password)).status).toBe(200);
  });

  it('let no more guesses through than the limit when they come at once', async () => {
    const env = e2eEnv();
    // Its own counters in cluster mode, so the suite's api is not locked out.
    const own = await startExtraApi({ SLUICE_KEY_PREFIX: `${env.keyPrefix}-burst` });
    try {
      const u = await user();
      // Read before the password check and counted after it, all twenty wrong guesses were
      // judged, and the right password after them let in.
      const burst = await Promise.all([
        ...Array.from({ length: 20 }, (_, i) =>
          freshLogin(u.username, `wrong-${i}`, {}, own.baseUrl),
        ),
        freshLogin(u.username, u.password, {}, own.baseUrl),
      ]);
      const judged = burst.filter((res) => res.status === 401 || res.status === 200);
      expect(judged.length).toBeLessThanOrEqual(5);
      for (const res of burst.filter((r) => !judged.includes(r))) {
        expect(res.status).toBe(429);
        expectEnvelope(res, '08004', -305);
      }
    } finally {
      await own.stop();
      if (env.mode === 'cluster') await removeKeys(`${env.keyPrefix}-burst`);
    }
  });

  it('are slowed down per address, and the lockout ends after its window', async () => {
    const env = e2eEnv();
    const strict = await startExtraApi({
      SLUICE_LOGIN_MAX_FAILURES_PER_ADDRESS: '3',
      SLUICE_LOGIN_LOCKOUT_SECONDS: '2',
      // Its own counters in cluster mode, so the suite's api is not locked out.
      SLUICE_KEY_PREFIX: `${env.keyPrefix}-strict`,
    });
    try {
      for (let i = 0; i < 3; i++) {
        const res = await freshLogin(randomName('nobody'), 'wrong', {}, strict.baseUrl);
        expect(res.status).toBe(401);
      }
      const locked = await freshLogin(env.adminUser, env.adminPassword, {}, strict.baseUrl);
      expect(locked.status).toBe(429);
      expect(Number(locked.headers.get('retry-after'))).toBeLessThanOrEqual(2);
      await new Promise((r) => setTimeout(r, 2_200));
      expect((await freshLogin(env.adminUser, env.adminPassword, {}, strict.baseUrl)).status).toBe(
        200,
      );
    } finally {
      await strict.stop();
      if (env.mode === 'cluster') await removeKeys(`${env.keyPrefix}-strict`);
    }
  });
});

async function removeKeys(prefix: string): Promise<void> {
  const redis = new Redis(e2eEnv().redisUrl);
  try {
    for (const pattern of [`${prefix}:*`, `{${prefix}}:*`]) {
      const keys = await redis.keys(pattern);
      if (keys.length > 0) await redis.del(...keys);
    }
  } finally {
    redis.disconnect();
  }
}

/** Every value under the run's key prefix, as text. */
async function everythingInRedis(redis: Redis, prefix: string): Promise<string> {
  const keys = [...(await redis.keys(`${prefix}:*`)), ...(await redis.keys(`{${prefix}}:*`))];
  const parts: string[] = [];
  for (const key of keys) {
    const type = await redis.type(key);
    let value: unknown;
    if (type === 'string') value = await redis.get(key);
    else if (type === 'hash') value = await redis.hgetall(key);
    else if (type === 'list') value = await redis.lrange(key, 0, -1);
    else if (type === 'set') value = await redis.smembers(key);
    else if (type === 'zset') value = await redis.zrange(key, 0, -1, 'WITHSCORES');
    else if (type === 'stream') value = await redis.xrange(key, '-', '+');
    parts.push(key, JSON.stringify(value));
  }
  return parts.join('\n');
}

describe('secrets', () => {
  it('keeps passwords and tokens out of the job hash of a finished query and out of Redis', async () => {
    const env = e2eEnv();
    const u = await user();
    const token = await tokenOf(u);
    const statement = `select 'job-marker-${randomUUID()}' as m`;
    const res = await executeAs(token, { statement });
    expect(res.status).toBe(200);
    const viaBasic = await call(
      env.baseUrl,
      'POST',
      '/v1/execute',
      { statement: 'select 2' },
      basic(u.username, u.password),
    );
    expect(viaBasic.status).toBe(200);
    const redis = new Redis(env.redisUrl);
    try {
      if (env.mode === 'cluster') {
        const job = await redis.hgetall(`{${env.keyPrefix}}:execute:${res.json.query_id}`);
        // The right hash: it holds the statement the worker needed.
        expect(job.data).toContain(statement.slice(8, 40));
        const text = JSON.stringify(job);
        for (const secret of [token, u.password, env.adminPassword, env.jwtSecret]) {
          expect(text).not.toContain(secret);
        }
        // Finished jobs are kept only for SLUICE_JOB_RETENTION_SECONDS, the last
        // SLUICE_JOB_RETENTION_COUNT of them (BullMQ removes the rest).
        expect(JSON.parse(job.opts)).toMatchObject({
          removeOnComplete: { age: 3600, count: 1000 },
          removeOnFail: { age: 3600, count: 1000 },
          attempts: 1,
        });
        const all = await everythingInRedis(redis, env.keyPrefix);
        expect(all.length).toBeGreaterThan(0);
        for (const secret of [
          token,
          token.split('.')[2],
          u.password,
          env.adminPassword,
          env.jwtSecret,
          Buffer.from(`${u.username}:${u.password}`).toString('base64'),
        ]) {
          expect(all).not.toContain(secret);
        }
      } else {
        // Standalone keeps its queue in memory: nothing of the run is in any Redis.
        expect(await everythingInRedis(redis, env.keyPrefix)).toBe('');
      }
    } finally {
      redis.disconnect();
    }
  });

  it('never writes passwords, tokens or parameter values to the log', async () => {
    const env = e2eEnv();
    const logged = await startExtraApi();
    const u = await user();
    const secretParam = `param-secret-${randomUUID()}`;
    const newPassword = `changed-${randomUUID()}`;
    const tokens: string[] = [];
    try {
      const at = logged.baseUrl;
      await freshLogin(u.username, 'a-wrong-password-xyz', {}, at);
      const login = await freshLogin(u.username, u.password, {}, at);
      const token = login.json.access_token as string;
      const refreshed = (await post('/v1/token_refresh', token, at)).json.access_token as string;
      tokens.push(token, refreshed);
      await executeAs(refreshed, { statement: 'select {p}::int', params: { p: secretParam } }, at);
      await executeAs(refreshed, { statement: 'select {p}', params: { p: secretParam } }, at);
      await executeAs(refreshed, { statement: 'selec {p}', params: { p: secretParam } }, at);
      await call(at, 'POST', '/v1/execute', { statement: 'select 1' }, basic(u.username, 'nope'));
      const admin = await freshLogin(env.adminUser, env.adminPassword, {}, at);
      await call(
        at,
        'PATCH',
        `/v1/users/${u.username}`,
        { password: newPassword },
        {
          authorization: `Bearer ${admin.json.access_token as string}`,
        },
      );
      tokens.push(admin.json.access_token as string);
      await post('/v1/logout', refreshed, at);
      await executeAs(refreshed, { statement: 'select 1' }, at);
    } finally {
      await logged.stop();
    }
    const output = logged.output();
    expect(output).toMatch(/listening|serving/);
    for (const secret of [
      u.password,
      'a-wrong-password-xyz',
      newPassword,
      env.adminPassword,
      env.jwtSecret,
      secretParam,
      ...tokens,
    ]) {
      expect(output).not.toContain(secret);
    }
  });
});
