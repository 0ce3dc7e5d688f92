import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Browser, BrowserContext } from 'playwright-core';
import { launchChromium } from './support/browser';
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
    const cells = await row.locator('td').allTextContents();
    expect(cells[1]).toBe(owner.username);
    expect(cells[2]).toBe('running');
    expect(cells[3]).toBe('');
    expect(cells[4]).toMatch(/^\d+\.\d s$/);
    expect(cells[5]).toBe('0');
    expect(cells[7]).toBe('select pg_sleep(30)');
    await tab.screenshot({ path: join(ARTIFACTS, 'admin-page-running.png'), fullPage: true });

    await row.locator('button.cancel').click();
    const res = await pending;
    expect(res.status).toBe(409);
    expect(res.json.status.vendor_code).toBe(-900);
    // Finished queries leave the default view; shown with them, it reads cancelled.
    await row.waitFor({ state: 'detached' });
    await tab.check('#show-finished');
    await tab.locator(`tr[data-query-id="${queryId}"][data-state="cancelled"]`).waitFor();
    expect(await tab.locator(`tr[data-query-id="${queryId}"] td`).nth(8).textContent()).toMatch(
      /cancel/,
    );
    await tab.screenshot({ path: join(ARTIFACTS, 'admin-page-cancelled.png'), fullPage: true });
  });

  it('refuses a wrong password on the page and keeps the data calls behind a token', async () => {
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
    const status = await tab.evaluate(async () => (await fetch('/v1/queries')).status);
    expect(status).toBe(401);
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
    await tab.check('#show-finished');
    await tab.locator('#updated', { hasText: 'updated' }).waitFor();
    const owners = await tab.locator('#queries tbody tr td:nth-child(2)').allTextContents();
    expect(owners.every((o) => o === plain.username)).toBe(true);
  });

  it('opens the queue dashboard for an administrator, parameters redacted (cluster), or says standalone mode has none', async () => {
    const { baseUrl, adminUser, adminPassword, mode } = e2eEnv();
    const secret = `hunter-${Date.now()}`;
    const ran = await execute(
      { statement: 'select {secret}::text as s', params: { secret } },
      { baseUrl },
    );
    expect(ran.status).toBe(200);
    const queryId = ran.json.query_id as string;
    // A browser answers the dashboard's Basic challenge with these.
    const tab = await page({ httpCredentials: { username: adminUser, password: adminPassword } });
    const res = await tab.goto(`${baseUrl}/admin/queues/queue/execute?status=completed`);
    if (mode === 'cluster') {
      expect(res?.status()).toBe(200);
      // Runs in the page, where `document` is (no DOM types here).
      await tab.waitForFunction((id: string) => {
        const text = (globalThis as unknown as { document: { body: { innerText: string } } })
          .document.body.innerText;
        return text.includes(id) && text.includes('[redacted]');
      }, queryId);
      expect(await tab.textContent('body')).not.toContain(secret);
      await tab.screenshot({ path: join(ARTIFACTS, 'queue-dashboard.png'), fullPage: true });
    } else {
      expect(res?.status()).toBe(404);
      expect(await tab.textContent('body')).toContain('standalone mode');
    }
  });
});
