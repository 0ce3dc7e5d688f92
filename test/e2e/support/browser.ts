import { existsSync } from 'node:fs';
import { Browser, Page, chromium } from 'playwright-core';

/** Debian's Chromium: playwright-core drives it and downloads no browser of its own. */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * Starts headless Chromium on a new, empty profile, with what this machine's closed network
 * needs (no background connections); fails with how to install it when it is missing.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium is not installed at ${CHROMIUM}: the browser tests need it. ` +
        'Install it with `apt-get install -y chromium` (.ci/run does this when it is missing).',
    );
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** Signs in on the admin page at `baseUrl` and shows finished queries too, as an operator would. */
export async function openAdminQueries(
  tab: Page,
  baseUrl: string,
  admin: { user: string; password: string },
): Promise<void> {
  await tab.goto(`${baseUrl}/admin`);
  await tab.fill('#username', admin.user);
  await tab.fill('#password', admin.password);
  await tab.click('#signin');
  await tab.waitForSelector('#view:not([hidden])');
  // The charts above the box fill in as their figures come: one that grows under the click moves
  // the box away from it, and the click lands beside it.
  for (let attempt = 1; !(await tab.isChecked('#show-finished')); attempt++) {
    await tab.check('#show-finished').catch((err: unknown) => {
      if (attempt >= 5) throw err;
    });
  }
}
