import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Browser, BrowserContext, Locator, Page, Response } from 'playwright-core';
import { launchChromium, openAdminQueries } from './support/browser';
import {
  closeDb,
  createUser,
  dropUser,
  e2eEnv,
  eventually,
  execute,
  request,
} from './support/client';
import { ROOT } from './support/service';

/** The query view at /admin, driven in Debian's headless Chromium. */

const ARTIFACTS = join(ROOT, 'test', 'artifacts');
/** SLUICE_ADMIN_SESSION_SECONDS as the suite runs the service (its default). */
const SESSION_SECONDS = 900;

let browser: Browser | undefined;
let context: BrowserContext | undefined;
const users: string[] = [];

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  // Playwright starts Chromium on a new, empty profile of its own (a fresh --user-data-dir).
  browser = await launchChromium();
});

afterEach(async () => {
  await context?.close();
  context = undefined;
});

afterAll(async () => {
  await browser?.close();
  for (const name of users) await dropUser(name);
  await closeDb();
});

/**
 * Saves a picture of the page for people to look at (what is checked is checked before it): the
 * window, scrolled to `focus`. Not the full page: after the whole suite an administrator's list
 * of finished queries runs past the tallest picture headless Chromium captures ("Unable to
 * capture screenshot").
 */
async function picture(tab: Page, name: string, focus?: Locator): Promise<void> {
  // The list is redrawn as it refreshes: the row may be replaced while it scrolls (Playwright:
  // "Element is not attached to the DOM"). The picture is for people, not a check: a scroll that
  // misses fails nothing.
  await focus?.scrollIntoViewIfNeeded({ timeout: 2_000 }).catch(() => undefined);
  await tab.screenshot({ path: join(ARTIFACTS, name) });
}

/**
 * Opens query `queryId`'s detail view from its row of the list, and waits until the view shows
 * that query's whole statement. The list is redrawn as it refreshes: a click can land while its
 * row is replaced, and the view then goes on showing the query opened before (whose statement is
 * whole as well), so the click is made again until the view names this query.
 */
async function openDetail(tab: Page, queryId: string): Promise<void> {
  // Runs in the page, where `document` is (no DOM types here).
  const shown = (id: string) => {
    type Found = { textContent: string | null; dataset: Record<string, string | undefined> };
    const { document } = globalThis as unknown as {
      document: { getElementById(id: string): Found | null };
    };
    return (
      document.getElementById('detail-id')?.textContent === id &&
      document.getElementById('detail-statement')?.dataset.whole === 'true'
    );
  };
  for (let attempt = 1; ; attempt++) {
    await tab.locator(`tr[data-query-id="${queryId}"] td`).nth(10).click();
    try {
      await tab.waitForFunction(shown, queryId, { timeout: 3_000 });
      return;
    } catch (err) {
      if (attempt === 3) throw err;
    }
  }
}

async function page(options: Parameters<Browser['newContext']>[0] = {}) {
  context = await browser!.newContext({ viewport: { width: 1280, height: 720 }, ...options });
  return context.newPage();
}

describe('AdminPage', () => {
  it('lists a running query with owner, state, elapsed time and rows, and cancels it with its button', async () => {
    const { baseUrl, adminUser, adminPassword } = e2eEnv();
    const owner = await createUser('e2e_page');
    users.push(owner.username);
    const pending = execute({ statement: 'select pg_sleep(30)' }, { token: owner.token });
    const queryId = await eventually(async () => {
      const list = await request(undefined, {
        method: 'GET',
        path: '/v1/queries',
        token: owner.token,
      });
      return (list.json as { query_id: string; state: string }[]).find((q) => q.state === 'running')
        ?.query_id;
    });

    const tab = await page();
    const loaded = await tab.goto(`${baseUrl}/admin`);
    expect(loaded?.status()).toBe(200);
    expect(loaded?.headers()['content-security-policy']).toMatch(/script-src 'sha256-/);
    await tab.fill('#username', adminUser);
    await tab.fill('#password', adminPassword);
    await tab.click('#signin');
    await tab.waitForSelector('#view:not([hidden])');
    expect(await tab.textContent('#who')).toContain(`${adminUser} (administrator)`);

    const row = tab.locator(`tr[data-query-id="${queryId}"]`);
    await row.waitFor();
    // Every column is labelled, and none is empty for every query: Kept result shows only while
    // a query in view has one (there is none here).
    const headings = await tab.locator('#queries thead th').allTextContents();
    expect(headings).toEqual([
      'Query',
      'Owner',
      'State',
      'Lane',
      'Started',
      'Duration',
      'Phases',
      'Rows made',
      'Kept result',
      'Database',
      'Statement',
      '',
    ]);
    expect(await tab.locator('#queries th.kept').isVisible()).toBe(false);
    const cells = await row.locator('td').allTextContents();
    expect(cells[1]).toBe(owner.username);
    expect(cells[2]).toBe('running');
    expect(cells[3]).toBe('interactive');
    expect(cells[4]).toMatch(/\d:\d\d/);
    // Milliseconds below a second, tenths of seconds above.
    expect(cells[5]).toMatch(/^(\d{1,3} ms|\d+\.\d s)$/);
    expect(cells[7]).toBe('0');
    expect(cells[10]).toBe('select pg_sleep(30)');
    await picture(tab, 'admin-page-running.png', row);

    await row.locator('button.cancel').click();
    const res = await pending;
    expect(res.status).toBe(409);
    expect(res.json.status.vendor_code).toBe(-900);
    // Finished queries leave the default view; shown with them, it reads cancelled.
    await row.waitFor({ state: 'detached' });
    await tab.check('#show-finished');
    await tab.locator(`tr[data-query-id="${queryId}"][data-state="cancelled"]`).waitFor();
    // Why it ended, under its State heading; the last column holds only the Cancel button.
    const ended = tab.locator(`tr[data-query-id="${queryId}"] td`);
    expect(await ended.nth(2).locator('.reason').textContent()).toMatch(/cancel/);
    expect(await ended.nth(11).textContent()).toBe('');
    await picture(tab, 'admin-page-cancelled.png', tab.locator(`tr[data-query-id="${queryId}"]`));
  });

  it('refuses a wrong password on the page and keeps the data calls behind the sign-in', async () => {
    const { baseUrl } = e2eEnv();
    // Not the admin: failed logins count towards a lockout.
    const someone = await createUser('e2e_page_wrong');
    users.push(someone.username);
    const tab = await page();
    await tab.goto(`${baseUrl}/admin`);
    await tab.fill('#username', someone.username);
    await tab.fill('#password', 'not-the-password');
    await tab.click('#signin');
    await tab.locator('#login-error', { hasText: 'invalid username or password' }).waitFor();
    expect(await tab.isHidden('#view')).toBe(true);
    for (const path of ['/admin/api/queries', '/v1/queries']) {
      const status = await tab.evaluate(async (url) => (await fetch(url)).status, path);
      expect(status).toBe(401);
    }
    expect((await context!.cookies(`${baseUrl}/admin`)).map((c) => c.name)).not.toContain(
      'sluice_admin',
    );
  });

  it('shows a user who is not an administrator only their own queries', async () => {
    const { baseUrl } = e2eEnv();
    const plain = await createUser('e2e_page_plain');
    users.push(plain.username);
    const tab = await page();
    await tab.goto(`${baseUrl}/admin`);
    await tab.fill('#username', plain.username);
    await tab.fill('#password', `pw-${plain.username}`);
    await tab.click('#signin');
    await tab.waitForSelector('#view:not([hidden])');
    expect(await tab.textContent('#who')).toContain('not an administrator');
    // The dashboard is for administrators: the page does not offer it.
    expect(await tab.isHidden('#dashboard')).toBe(true);
    await tab.check('#show-finished');
    await tab.locator('#updated', { hasText: 'updated' }).waitFor();
    const owners = await tab.locator('#queries tbody tr td:nth-child(2)').allTextContents();
    expect(owners.every((o) => o === plain.username)).toBe(true);
  });

  it('links a kept result for its owner, until when it is kept, and serves it on the sign-in', async () => {
    const { baseUrl } = e2eEnv();
    const owner = await createUser('e2e_page_kept');
    users.push(owner.username);
    const res = await execute(
      { statement: 'select 7 as n from pg_sleep(0.5)', wait_timeout: 0 },
      { token: owner.token, headers: { 'accept-encoding': 'identity' } },
    );
    expect(res.status).toBe(202);
    const queryId = res.json.query_id as string;
    const tab = await page();
    await tab.goto(`${baseUrl}/admin`);
    await tab.fill('#username', owner.username);
    await tab.fill('#password', `pw-${owner.username}`);
    await tab.click('#signin');
    await tab.waitForSelector('#view:not([hidden])');
    await tab.check('#show-finished');
    const link = tab.locator(`tr[data-query-id="${queryId}"][data-state="succeeded"] a.result`);
    await link.waitFor();
    expect(await tab.locator('#queries th.kept').isVisible()).toBe(true);
    // Where the body is: the suite's spool (a directory, s3rver) or, without one, Redis.
    const where = e2eEnv().spool === 'redis' ? 'Redis' : 'the spool';
    expect(await link.textContent()).toMatch(new RegExp(`^kept in ${where} until \\d`));
    const href = await link.getAttribute('href');
    expect(href).toBe(`/admin/api/queries/${queryId}/result`);
    // The page's cookie is all it takes: the body is the query's own.
    const body = await tab.evaluate(async (url) => (await fetch(url)).json(), href!);
    expect(body).toMatchObject({ query_id: queryId, data: [[7]], status: { vendor_code: 0 } });
    // Without the sign-in there is nothing to fetch.
    const anonymous = await request(undefined, { method: 'GET', path: href! });
    expect(anonymous.status).toBe(401);
  });

  it('opens the queue dashboard from the same sign-in, by its link: no Basic prompt, parameters redacted (cluster)', async () => {
    const { baseUrl, adminUser, adminPassword, mode } = e2eEnv();
    const secret = `hunter-${Date.now()}`;
    const ran = await execute(
      { statement: 'select {secret}::text as s', params: { secret } },
      { baseUrl },
    );
    expect(ran.status).toBe(200);
    const queryId = ran.json.query_id as string;

    // No httpCredentials: a Basic challenge would leave the browser with nothing to answer.
    const tab = await page();
    const answers: Response[] = [];
    tab.on('response', (response) => answers.push(response));
    await tab.goto(`${baseUrl}/admin`);
    await tab.fill('#username', adminUser);
    await tab.fill('#password', adminPassword);
    await tab.click('#signin');
    await tab.waitForSelector('#view:not([hidden])');
    const signedInAt = answers.length;

    const [cookie, ...others] = (await context!.cookies(`${baseUrl}/admin`)).filter(
      (c) => c.name === 'sluice_admin',
    );
    expect(others).toEqual([]);
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/admin' });
    const lifeLeft = cookie.expires - Date.now() / 1000;
    expect(lifeLeft).toBeGreaterThan(SESSION_SECONDS - 60);
    expect(lifeLeft).toBeLessThanOrEqual(SESSION_SECONDS);
    // Scoped to /admin: the browser keeps it away from the api's own paths.
    for (const path of ['/', '/v1/queries', '/administrator']) {
      const sent = (await context!.cookies(`${baseUrl}${path}`)).map((c) => c.name);
      expect([path, sent]).toEqual([path, []]);
    }
    // The page's script cannot read it.
    expect(await tab.evaluate<string>('document.cookie')).not.toContain('sluice_admin');

    if (mode === 'cluster') {
      await Promise.all([tab.waitForURL(`${baseUrl}/admin/queues`), tab.click('#dashboard')]);
    } else {
      // Standalone mode has no queue dashboard: the page offers no link to it.
      expect(await tab.isHidden('#dashboard')).toBe(true);
      await tab.goto(`${baseUrl}/admin/queues`);
    }
    // The dashboard's page may not be framed, and runs and fetches nothing from other sites.
    const opened = answers.find((r) => r.url() === `${baseUrl}/admin/queues`);
    const headers = (await opened?.allHeaders()) ?? {};
    expect(headers['content-security-policy']).toMatch(/frame-ancestors 'none'/);
    expect(headers['content-security-policy']).toMatch(/script-src 'self'(;|$)/);
    expect(headers['x-frame-options']).toBe('DENY');
    expect(headers['x-content-type-options']).toBe('nosniff');
    if (mode === 'cluster') {
      await tab.goto(`${baseUrl}/admin/queues/queue/execute?status=completed`);
      // Runs in the page, where `document` is (no DOM types here).
      await tab.waitForFunction((id: string) => {
        const text = (globalThis as unknown as { document: { body: { innerText: string } } })
          .document.body.innerText;
        return text.includes(id) && text.includes('[redacted]');
      }, queryId);
      expect(await tab.textContent('body')).not.toContain(secret);
      await picture(tab, 'queue-dashboard.png');
    } else {
      expect(await tab.textContent('body')).toContain('standalone mode');
    }
    // Not one Basic challenge in the whole visit, and no 401 at all once signed in.
    const challenges = await Promise.all(
      answers.map(async (r) => (await r.allHeaders())['www-authenticate'] ?? ''),
    );
    expect(challenges.filter((c) => /basic/i.test(c))).toEqual([]);
    const refused = answers.slice(signedInAt).filter((r) => r.status() === 401);
    expect(refused.map((r) => r.url())).toEqual([]);
    const dashboard = answers.filter((r) => r.url().startsWith(`${baseUrl}/admin/queues`));
    expect(dashboard.length).toBeGreaterThan(0);
    // The page, its scripts and its data calls all went through (304: the browser's cache).
    const statuses = dashboard.map((r) => r.status());
    if (mode === 'cluster') expect(statuses.filter((st) => st !== 200 && st !== 304)).toEqual([]);
    else expect(statuses.filter((st) => st !== 404)).toEqual([]);
    // Every answer there, the page's scripts and data calls too, fetches nothing from other sites
    // (bull-board's page links a web font) and sends no referrer on.
    for (const answer of dashboard) {
      const sent = await answer.allHeaders();
      const csp = sent['content-security-policy'] ?? '';
      expect({
        url: answer.url(),
        referrer: sent['referrer-policy'],
        frames: sent['x-frame-options'],
        sources: ['default-src', 'connect-src', 'font-src'].map((d) =>
          new RegExp(`(^|; )${d} 'self'(;|$)`).test(csp),
        ),
      }).toEqual({
        url: answer.url(),
        referrer: 'no-referrer',
        frames: 'DENY',
        sources: [true, true, true],
      });
    }
  });

  it('sends a browser that is not signed in from the dashboard to the sign-in, without a prompt', async () => {
    const { baseUrl } = e2eEnv();
    const tab = await page();
    const answers: Response[] = [];
    tab.on('response', (response) => answers.push(response));
    const res = await tab.goto(`${baseUrl}/admin/queues`);
    expect(tab.url()).toBe(`${baseUrl}/admin`);
    expect(res?.status()).toBe(200);
    await tab.waitForSelector('#login:not([hidden])');
    expect(answers[0].status()).toBe(303);
    for (const r of answers) {
      expect((await r.allHeaders())['www-authenticate'] ?? '').not.toMatch(/basic/i);
    }
  });

  it('signs out: the cookie is gone, the dashboard asks for the sign-in again, a copy of the cookie is revoked', async () => {
    const { baseUrl, adminUser, adminPassword } = e2eEnv();
    const tab = await page();
    await tab.goto(`${baseUrl}/admin`);
    await tab.fill('#username', adminUser);
    await tab.fill('#password', adminPassword);
    await tab.click('#signin');
    await tab.waitForSelector('#view:not([hidden])');
    const copy = (await context!.cookies(`${baseUrl}/admin`)).find(
      (c) => c.name === 'sluice_admin',
    )!;
    expect(copy).toBeDefined();

    await tab.click('#signout');
    await tab.waitForSelector('#login:not([hidden])');
    await eventually(async () =>
      (await context!.cookies(`${baseUrl}/admin`)).some((c) => c.name === 'sluice_admin')
        ? undefined
        : true,
    );
    // A reload keeps the browser signed out.
    await tab.reload();
    await tab.waitForSelector('#login:not([hidden])');
    expect(await tab.isHidden('#dashboard')).toBe(true);
    await tab.goto(`${baseUrl}/admin/queues`);
    expect(tab.url()).toBe(`${baseUrl}/admin`);

    const replayed = await request(undefined, {
      method: 'GET',
      path: '/admin/api/queries',
      baseUrl,
      headers: { cookie: `sluice_admin=${copy.value}` },
    });
    expect(replayed.status).toBe(401);
    expect(replayed.json.status.vendor_code).toBe(-303);
  });
  it('shows where time goes: durations in ms, start times, phase bars, a detail view, filters and charts that draw', async () => {
    const { baseUrl, adminUser, adminPassword } = e2eEnv();
    const owner = await createUser('e2e_page_time');
    users.push(owner.username);
    const quick = await execute({ statement: 'select 1 as quick' }, { token: owner.token });
    const slow = await execute(
      { statement: 'select 2 as slow from pg_sleep(0.3)' },
      { token: owner.token },
    );
    const failed = await execute(
      { statement: 'select * from no_such_table_page' },
      { token: owner.token },
    );
    // Runs 0.3 s before its first row, then streams a row every 0.1 s.
    const streamed = await execute(
      {
        statement:
          'select g, pg_sleep(case when g = 1 then 0.3 else 0.1 end) from generate_series(1, 4) g',
        fetch_size: 1,
      },
      { token: owner.token },
    );
    // Longer than the list shows: the detail view has it whole.
    const longStatement = `select 3 as long -- ${'a fairly long comment, '.repeat(20)}end`;
    const long = await execute({ statement: longStatement }, { token: owner.token });
    expect([quick.status, slow.status, failed.status, streamed.status, long.status]).toEqual([
      200, 200, 400, 200, 200,
    ]);
    const tab = await page();
    await openAdminQueries(tab, baseUrl, { user: adminUser, password: adminPassword });
    await tab.selectOption('#filter-user', owner.username);
    const quickRow = tab.locator(`tr[data-query-id="${quick.json.query_id as string}"]`);
    const slowRow = tab.locator(`tr[data-query-id="${slow.json.query_id as string}"]`);
    await quickRow.waitFor();
    // The filter applies as the table is drawn again: wait for that draw, not the first row seen.
    // A function, not a string: the page's CSP allows no eval, which a string predicate needs.
    await tab.waitForFunction((name: string) => {
      const { document } = globalThis as unknown as {
        document: { querySelectorAll(s: string): { textContent: string | null }[] };
      };
      const owners = [...document.querySelectorAll('#queries tbody tr td:nth-child(2)')];
      return owners.length > 0 && owners.every((td) => td.textContent === name);
    }, owner.username);
    // Only the owner's queries, each with its start, a duration a person can tell apart, and a bar.
    const owners = await tab.locator('#queries tbody tr td:nth-child(2)').allTextContents();
    expect(new Set(owners)).toEqual(new Set([owner.username]));
    const quickCells = await quickRow.locator('td').allTextContents();
    expect(quickCells[5]).toMatch(/^\d{1,3} ms$/);
    const slowMs = Number((await slowRow.locator('td').nth(5).textContent())!.replace(' ms', ''));
    expect(slowMs).toBeGreaterThanOrEqual(300);
    expect(await quickRow.locator('.phases .phase-queued').count()).toBe(1);
    expect(await quickRow.locator('.phases .phase-running').count()).toBe(1);
    // Queued, running until its first rows came back, streaming from then to its end.
    const streamedRow = tab.locator(`tr[data-query-id="${streamed.json.query_id as string}"]`);
    const phaseMs = async (row: Locator, phase: string) => {
      const title = await row.locator(`.phases .phase-${phase}`).getAttribute('title');
      const [, ms] = /^\w+ (\d+) ms$/.exec(title ?? '') ?? [];
      return ms === undefined ? undefined : Number(ms);
    };
    expect(
      await streamedRow
        .locator('.phases .phase')
        .evaluateAll((parts) =>
          parts.map((p) => (p as unknown as { className: string }).className),
        ),
    ).toEqual(['phase phase-queued', 'phase phase-running', 'phase phase-streaming']);
    expect(await phaseMs(streamedRow, 'running')).toBeGreaterThanOrEqual(250);
    expect(await phaseMs(streamedRow, 'streaming')).toBeGreaterThanOrEqual(250);
    // The slow one ran its 0.3 s before its row: that is running, not streaming.
    expect(await phaseMs(slowRow, 'running')).toBeGreaterThanOrEqual(250);
    expect(await phaseMs(slowRow, 'streaming')).toBeLessThan(250);
    // Filters by state and lane.
    await tab.selectOption('#filter-state', 'failed');
    await tab.locator(`tr[data-query-id="${failed.json.query_id as string}"]`).waitFor();
    await quickRow.waitFor({ state: 'detached' });
    await tab.selectOption('#filter-state', '');
    await tab.selectOption('#filter-lane', 'export');
    await quickRow.waitFor({ state: 'detached' });
    await tab.selectOption('#filter-lane', '');
    // The list shows a long statement's first 200 characters; its detail view, all of it.
    const longRow = tab.locator(`tr[data-query-id="${long.json.query_id as string}"]`);
    expect(longStatement.length).toBeGreaterThan(400);
    expect(await longRow.locator('td').nth(10).textContent()).toBe(longStatement.slice(0, 200));
    await openDetail(tab, long.json.query_id as string);
    expect(await tab.textContent('#detail-statement')).toBe(longStatement);
    // One query opened: its whole statement, timings, rows, status and lane.
    await openDetail(tab, slow.json.query_id as string);
    expect(await tab.textContent('#detail-statement')).toBe('select 2 as slow from pg_sleep(0.3)');
    const facts = await tab.locator('#detail-facts').textContent();
    expect(facts).toMatch(/streaming\d{4}-\d\d-\d\dT/);
    expect(facts).toMatch(/phasesqueued \d+ ms, running \d+ ms, streaming \d+ ms/);
    expect(facts).toContain('lane' + 'interactive');
    expect(facts).toContain('rows1 made, 1 sent');
    expect(facts).toMatch(/bytes\d+ made, \d+ sent/);
    expect(facts).toContain('status00000 (0)');
    expect(facts).toMatch(/duration\d+ ms/);
    // The charts draw: each has a line with points, from this api's own counts.
    await tab.waitForSelector('#charts[data-drawn="true"]');
    for (const id of ['chart-queue', 'chart-rate', 'chart-latency']) {
      const points = await tab
        .locator(`#${id} polyline`)
        .evaluateAll((lines) =>
          lines.map((l) =>
            (l as unknown as { getAttribute(n: string): string }).getAttribute('points'),
          ),
        );
      expect(points.length).toBeGreaterThanOrEqual(2);
      expect(points.some((p) => p.trim().split(' ').length > 1)).toBe(true);
    }
    expect(await tab.locator('#chart-rate-legend').textContent()).toMatch(/succeeded \d/);
    // And they refresh by themselves: the page asks for the figures again, unprompted.
    const again = await tab.waitForResponse((r) => r.url() === `${baseUrl}/admin/api/stats`, {
      timeout: 15_000,
    });
    expect(again.status()).toBe(200);
    await picture(tab, 'admin-page-time.png');
  });

  it('keeps a query it shows in detail once newer queries push it out of the list', async () => {
    const { baseUrl, adminUser, adminPassword } = e2eEnv();
    const owner = await createUser('e2e_page_kept_detail');
    users.push(owner.username);
    const longStatement = `select 4 as opened -- ${'a comment to make it long, '.repeat(10)}end`;
    const opened = await execute({ statement: longStatement }, { token: owner.token });
    expect(opened.status).toBe(200);
    const tab = await page();
    await openAdminQueries(tab, baseUrl, { user: adminUser, password: adminPassword });
    const row = tab.locator(`tr[data-query-id="${opened.json.query_id as string}"]`);
    await openDetail(tab, opened.json.query_id as string);
    // The list holds the newest 500 queries (QueriesService): 500 newer ones push this one out,
    // as a busy service does within seconds (4 at a time: the suite's SLUICE_MAX_ACTIVE_PER_USER
    // is 6).
    const ran = await inTurns(500, 4, () =>
      execute({ statement: 'select 1' }, { token: owner.token }).then((r) => r.status),
    );
    expect(ran.filter((status) => status !== 200)).toEqual([]);
    await row.waitFor({ state: 'detached' });
    // Drawn again after that, by the next refreshes: still there, whole, with how it ended.
    await tab.waitForTimeout(2_500);
    expect(await tab.isVisible('#detail')).toBe(true);
    expect(await tab.getAttribute('#detail-statement', 'data-whole')).toBe('true');
    expect(await tab.textContent('#detail-statement')).toBe(longStatement);
    expect(await tab.textContent('#detail-id')).toBe(opened.json.query_id);
    expect(await tab.locator('#detail-facts').textContent()).toContain('statesucceeded');
    // Closed, it is gone.
    await tab.click('#detail-close');
    expect(await tab.isVisible('#detail')).toBe(false);
  });
});

/** Runs `task` `count` times, `width` at a time; its results in the order they were started. */
async function inTurns<T>(count: number, width: number, task: () => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const i = next++;
      results[i] = await task();
    }
  };
  await Promise.all(Array.from({ length: width }, lane));
  return results;
}
