import { Server, createServer } from 'node:http';
import { once } from 'node:events';
import { Browser, BrowserContext, Request } from 'playwright-core';
import { launchChromium } from './support/browser';
import { HttpResult, closeDb, createUser, db, dropUser, e2eEnv, login } from './support/client';
import { freePort, randomName } from './support/service';
import { basic, call, expectEnvelope } from './support/users';

/**
 * Pages on other sites must not make a browser run SQL or change anything on the api, whatever
 * credentials the browser holds for it: refused with 403 / -703 by `Sec-Fetch-Site` and `Origin`.
 */

const EVIL = 'http://evil.example';

let schema: string;
let table: string;

/** What the probe table holds, in insertion order. */
async function rows(): Promise<string[]> {
  const { rows } = await db().query<{ x: string }>(`select x from ${table} order by ctid`);
  return rows.map((r) => r.x);
}

function adminBasic(): Record<string, string> {
  const { adminUser, adminPassword } = e2eEnv();
  return basic(adminUser, adminPassword);
}

function insert(value: string): string {
  return `insert into ${table} values ('${value}')`;
}

function expectRefused(res: HttpResult): void {
  expect(res.status).toBe(403);
  expectEnvelope(res, '42501', -703);
  expect(res.json.status.reason).toMatch(/^cross-site requests may not run or change anything/);
}

beforeAll(async () => {
  const role = e2eEnv().adminRole;
  schema = randomName('e2e_xsite');
  table = `${schema}.csrf_probe`;
  await db().query(`CREATE SCHEMA ${schema}`);
  await db().query(`CREATE TABLE ${table} (x text)`);
  // The admin's role may not be a superuser: it gets exactly what the attack would need.
  await db().query(`GRANT USAGE ON SCHEMA ${schema} TO ${role}`);
  await db().query(`GRANT INSERT, SELECT ON ${table} TO ${role}`);
});

afterEach(async () => {
  await db().query(`DELETE FROM ${table}`);
});

afterAll(async () => {
  await db().query(`DROP SCHEMA ${schema} CASCADE`);
  await closeDb();
});

describe('Cross-site requests (plain HTTP)', () => {
  it('refuses POST /v1/execute with a foreign Origin on every api, with Basic or Bearer, and runs nothing', async () => {
    const { baseUrls } = e2eEnv();
    const token = await login();
    for (const baseUrl of baseUrls) {
      for (const auth of [adminBasic(), { authorization: `Bearer ${token}` }]) {
        const res = await call(
          baseUrl,
          'POST',
          '/v1/execute',
          { statement: insert('origin') },
          { ...auth, origin: EVIL },
        );
        expectRefused(res);
        expect(res.json.status.reason).toContain(`Origin ${EVIL} is not this service's origin`);
      }
    }
    expect(await rows()).toEqual([]);
  });

  it('refuses Sec-Fetch-Site cross-site and same-site, on POST and on GET /v1/execute', async () => {
    const { baseUrl, defaultDatabase } = e2eEnv();
    for (const site of ['cross-site', 'same-site']) {
      expectRefused(
        await call(
          baseUrl,
          'POST',
          '/v1/execute',
          { statement: insert(site) },
          { ...adminBasic(), 'sec-fetch-site': site },
        ),
      );
      for (const path of ['/v1/execute', `/v1/execute/${defaultDatabase}`]) {
        const query = `?statement=${encodeURIComponent(insert(`get-${site}`))}`;
        expectRefused(
          await call(baseUrl, 'GET', `${path}${query}`, undefined, {
            ...adminBasic(),
            'sec-fetch-site': site,
          }),
        );
      }
    }
    expect(await rows()).toEqual([]);
  });

  it('refuses a statement in a link opened from outside any page (Sec-Fetch-Site none), with Basic', async () => {
    // What a browser sends for a link clicked in a mail or chat program, with the Basic
    // credentials it holds for the service.
    const { baseUrl } = e2eEnv();
    const query = `?statement=${encodeURIComponent(insert('link'))}`;
    const res = await call(baseUrl, 'GET', `/v1/execute${query}`, undefined, {
      ...adminBasic(),
      'sec-fetch-site': 'none',
      'sec-fetch-mode': 'navigate',
      'sec-fetch-user': '?1',
    });
    expectRefused(res);
    expect(res.json.status.reason).toMatch(/Sec-Fetch-Site: none/);
    expect(await rows()).toEqual([]);
  });

  it('runs a statement sent same-origin, as the api itself would see a page of its own', async () => {
    const { baseUrl } = e2eEnv();
    const res = await call(
      baseUrl,
      'POST',
      '/v1/execute',
      { statement: insert('same-origin') },
      { ...adminBasic(), origin: baseUrl, 'sec-fetch-site': 'same-origin' },
    );
    expect(res.status).toBe(200);
    expect(await rows()).toEqual(['same-origin']);
  });

  it('answers reads from any site', async () => {
    const { baseUrl } = e2eEnv();
    const res = await call(baseUrl, 'GET', '/v1/info', undefined, {
      origin: EVIL,
      'sec-fetch-site': 'cross-site',
    });
    expect(res.status).toBe(200);
  });

  it('refuses other changes from another site: cancel, users, the queue dashboard', async () => {
    const { baseUrl } = e2eEnv();
    const foreign = { ...adminBasic(), origin: EVIL };
    expectRefused(
      await call(
        baseUrl,
        'DELETE',
        '/v1/queries/00000000-0000-4000-8000-000000000000',
        undefined,
        foreign,
      ),
    );
    expectRefused(
      await call(
        baseUrl,
        'POST',
        '/v1/users',
        { username: randomName('e2e_xsite_user'), password: 'long-enough', role: 'x' },
        foreign,
      ),
    );
    // bull-board's action routes (refused as read-only anyway) sit in a plugin of their own.
    expectRefused(
      await call(baseUrl, 'PUT', '/admin/queues/api/queues/execute/pause', undefined, foreign),
    );
  });

  it('refuses a login from another site without counting it as a failed attempt', async () => {
    const { baseUrl } = e2eEnv();
    const user = await createUser('e2e_xsite_login');
    const control = await createUser('e2e_xsite_lockout');
    try {
      // More than SLUICE_LOGIN_MAX_FAILURES (5) wrong passwords, all from another site.
      for (let i = 0; i < 6; i++) {
        expectRefused(
          await call(
            baseUrl,
            'POST',
            '/v1/login',
            { username: user.username, password: 'wrong-password' },
            { origin: EVIL },
          ),
        );
      }
      const res = await call(baseUrl, 'POST', '/v1/login', {
        username: user.username,
        password: `pw-${user.username}`,
      });
      expect(res.status).toBe(200);
      // The same wrong passwords sent without Origin do lock the name out: the count is live.
      for (let i = 0; i < 5; i++) {
        await call(baseUrl, 'POST', '/v1/login', {
          username: control.username,
          password: 'wrong-password',
        });
      }
      const locked = await call(baseUrl, 'POST', '/v1/login', {
        username: control.username,
        password: `pw-${control.username}`,
      });
      expect(locked.status).toBe(429);
    } finally {
      await dropUser(user.username);
      await dropUser(control.username);
    }
  });
});

/** The attacker's page: every way to send the api a request without a CORS preflight. */
function attackPage(api: string, database: string): string {
  const statement = (value: string) => JSON.stringify(insert(value));
  // A text/plain form sends `name=value`: the `--` turns `=x` into a comment.
  const formField = insert('form').replace(/"/g, '&quot;') + ' --';
  return `<!doctype html>
<title>attack</title>
<iframe name="sink"></iframe>
<form id="form" method="POST" enctype="text/plain" target="sink" action="${api}/v1/execute">
  <input type="hidden" name="${formField}" value="x">
</form>
<script>
  const api = ${JSON.stringify(api)};
  const simple = { mode: 'no-cors', credentials: 'include' };
  const post = (path, body) =>
    fetch(api + path, { ...simple, method: 'POST', headers: { 'content-type': 'text/plain' }, body });
  const image = (path) =>
    new Promise((settle) => {
      const img = new Image();
      img.onload = img.onerror = settle;
      img.src = api + path;
    });
  const attempts = [
    post('/v1/execute', ${statement('post')}),
    post('/v1/execute/${database}', ${statement('post-database')}),
    image('/v1/execute?statement=' + encodeURIComponent(${statement('img')})),
    fetch(api + '/v1/execute/${database}?statement=' + encodeURIComponent(${statement('get')}), simple),
    new Promise((settle) => {
      document.querySelector('iframe').onload = settle;
      document.getElementById('form').submit();
    }),
    post('/v1/logout', ''),
    post('/v1/users', JSON.stringify({ username: 'csrf_user', password: 'csrf-password', role: 'x' })),
  ];
  Promise.allSettled(attempts).then(() => setTimeout(() => (document.title = 'done'), 300));
</script>`;
}

/** The attacker's page against the admin pages: what it can send without a preflight. */
function adminAttackPage(api: string): string {
  return `<!doctype html>
<title>admin attack</title>
<iframe name="dashboard" src="${api}/admin/queues/api/queues"></iframe>
<script>
  const api = ${JSON.stringify(api)};
  const simple = { mode: 'no-cors', credentials: 'include' };
  const attempts = [
    fetch(api + '/admin/api/queries', simple),
    fetch(api + '/admin/session', simple),
    fetch(api + '/admin/queues/api/queues', simple),
    fetch(api + '/admin/session', { ...simple, method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' }),
    new Promise((settle) => {
      const frame = document.querySelector('iframe');
      frame.onload = frame.onerror = settle;
    }),
  ];
  Promise.allSettled(attempts).then(() => setTimeout(() => (document.title = 'done'), 300));
</script>`;
}

describe('Cross-site requests (Chromium)', () => {
  let browser: Browser | undefined;
  let context: BrowserContext | undefined;
  let attacker: Server | undefined;
  let attackerUrl: string;

  beforeAll(async () => {
    const { baseUrl, defaultDatabase } = e2eEnv();
    const port = await freePort();
    // localhost is another site than the api's 127.0.0.1: the browser says Sec-Fetch-Site: cross-site.
    attackerUrl = `http://localhost:${port}/`;
    const html = attackPage(baseUrl, defaultDatabase);
    const adminHtml = adminAttackPage(baseUrl);
    attacker = createServer((request, response) => {
      response
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end(request.url === '/admin-attack' ? adminHtml : html);
    });
    attacker.listen(port, '127.0.0.1');
    await once(attacker, 'listening');
    browser = await launchChromium();
  });

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    attacker?.closeAllConnections();
    attacker?.close();
  });

  it("stops a foreign page from running SQL with the administrator's Basic credentials; the same request from the api's own origin runs", async () => {
    const { baseUrl, adminUser, adminPassword } = e2eEnv();
    // Chromium answers only a Basic challenge of its own: the api's 401 names Bearer and Basic in
    // one header, which it does not take up. So the browser sends the admin's Basic credentials
    // on every request, as one that had them cached for the api would (no CORS preflight).
    context = await browser!.newContext({ extraHTTPHeaders: basic(adminUser, adminPassword) });
    const tab = await context.newPage();
    const sent: Request[] = [];
    const record = (request: Request) => {
      if (request.url().startsWith(baseUrl)) sent.push(request);
    };
    tab.on('request', record);
    await tab.goto(attackerUrl);
    await tab.waitForFunction('document.title === "done"');
    tab.off('request', record);

    expect(await rows()).toEqual([]);
    const answers = await Promise.all(
      sent.map(async (request) => {
        const response = await request.response();
        let vendorCode: number | undefined;
        try {
          vendorCode = ((await response?.json()) as { status: { vendor_code: number } }).status
            .vendor_code;
        } catch {
          // An opaque (no-cors) response has no body to read here; its status still counts.
        }
        const { pathname, searchParams } = new URL(request.url());
        return {
          request: `${request.method()} ${pathname}${searchParams.has('statement') ? '?statement' : ''}`,
          credentials: (await request.allHeaders()).authorization?.startsWith('Basic ') ?? false,
          status: response?.status(),
          vendorCode,
        };
      }),
    );
    const { defaultDatabase } = e2eEnv();
    // Simple requests only: none was preflighted (no OPTIONS), each carried the credentials.
    expect(answers.map((a) => a.request).sort()).toEqual(
      [
        'POST /v1/execute',
        'POST /v1/execute',
        `POST /v1/execute/${defaultDatabase}`,
        'GET /v1/execute?statement',
        `GET /v1/execute/${defaultDatabase}?statement`,
        'POST /v1/logout',
        'POST /v1/users',
      ].sort(),
    );
    expect(answers.every((a) => a.credentials)).toBe(true);
    // The image's response is blocked from the page (ORB) and may not reach Playwright.
    for (const answer of answers) {
      if (answer.status !== undefined) expect(answer).toMatchObject({ status: 403 });
      if (answer.vendorCode !== undefined) expect(answer).toMatchObject({ vendorCode: -703 });
    }
    expect(answers.filter((a) => a.status === 403).length).toBeGreaterThanOrEqual(6);
    expect(answers.some((a) => a.vendorCode === -703)).toBe(true);

    // The control: the same request from the api's own origin, in the same browser, runs.
    await tab.goto(`${baseUrl}/v1/info`);
    const status = await tab.evaluate(
      async ([statement]) =>
        (
          await fetch('/v1/execute', {
            method: 'POST',
            credentials: 'include',
            headers: { 'content-type': 'text/plain' },
            body: statement,
          })
        ).status,
      [insert('control')],
    );
    expect(status).toBe(200);
    expect(await rows()).toEqual(['control']);
  });

  it("keeps a foreign page from using the admin pages' sign-in: the browser does not send the cookie, the api refuses", async () => {
    const { baseUrl, adminUser, adminPassword } = e2eEnv();
    await context?.close();
    context = await browser!.newContext();
    const tab = await context.newPage();
    await tab.goto(`${baseUrl}/admin`);
    await tab.fill('#username', adminUser);
    await tab.fill('#password', adminPassword);
    await tab.click('#signin');
    await tab.waitForSelector('#view:not([hidden])');
    const cookies = await context.cookies(`${baseUrl}/admin`);
    expect(cookies.map((c) => c.name)).toContain('sluice_admin');

    const sent: Request[] = [];
    const record = (request: Request) => {
      if (request.url().startsWith(`${baseUrl}/admin`)) sent.push(request);
    };
    const attack = await context.newPage();
    attack.on('request', record);
    await attack.goto(`${attackerUrl}admin-attack`);
    await attack.waitForFunction('document.title === "done"');
    attack.off('request', record);

    const answers = await Promise.all(
      sent.map(async (request) => ({
        request: `${request.method()} ${new URL(request.url()).pathname}`,
        cookie: (await request.allHeaders()).cookie ?? '',
        status: (await request.response())?.status(),
      })),
    );
    expect(answers.map((a) => a.request).sort()).toEqual(
      [
        'GET /admin/api/queries',
        'GET /admin/session',
        'GET /admin/queues/api/queues',
        'GET /admin/queues/api/queues',
        'POST /admin/session',
      ].sort(),
    );
    // SameSite=Strict: not one carried the cookie; and none got anything but a refusal.
    for (const answer of answers) {
      expect(answer.cookie).not.toContain('sluice_admin');
      if (answer.status !== undefined) expect([401, 403]).toContain(answer.status);
    }
    // A link on the foreign page, followed: a top-level navigation, which SameSite=Lax would let
    // the cookie ride along on; Strict does not.
    const [navigation] = await Promise.all([
      attack.waitForRequest(`${baseUrl}/admin/queues`),
      attack.evaluate(`location.href = ${JSON.stringify(`${baseUrl}/admin/queues`)}`),
    ]);
    const headers = await navigation.allHeaders();
    expect(headers['sec-fetch-site']).toBe('cross-site');
    expect(headers.cookie ?? '').not.toContain('sluice_admin');
    expect((await navigation.response())?.status()).toBe(303);
    // The browser is still signed in on the service's own page.
    await tab.reload();
    await tab.waitForSelector('#view:not([hidden])');
  });
});
