import { createHmac, hkdfSync, randomUUID } from 'node:crypto';
import { ApplicationNames } from './application.names';
import { purposeKey } from './credential.key';

const KEY = 'k'.repeat(32);

describe(ApplicationNames.name, () => {
  it('is the same for a query id in every process with the key, and differs per query and per key', () => {
    const id = randomUUID();
    const name = new ApplicationNames(KEY).of(id);
    expect(name).toMatch(/^sluice:[A-Za-z0-9_-]{24}$/);
    expect(new ApplicationNames(KEY).of(id)).toBe(name);
    expect(new ApplicationNames(KEY).of(randomUUID())).not.toBe(name);
    expect(new ApplicationNames('x'.repeat(32)).of(id)).not.toBe(name);
  });

  it('holds nothing of the query id, and fits application_name (63 bytes)', () => {
    const id = randomUUID();
    const name = new ApplicationNames(KEY).of(id);
    expect(Buffer.byteLength(name)).toBeLessThanOrEqual(63);
    for (const part of id.split('-')) expect(name).not.toContain(part);
  });

  it('is keyed apart from the login roles and the sealed credentials', () => {
    const id = randomUUID();
    const tag = new ApplicationNames(KEY).of(id).slice('sluice:'.length);
    for (const purpose of [
      'login-role-names',
      'login-role-passwords',
      'database-user-credentials',
    ]) {
      const other = createHmac('sha256', purposeKey(KEY, purpose)).update(id).digest('base64url');
      expect(other.startsWith(tag)).toBe(false);
    }
  });

  it('is derived as docs/architecture.md says, so that an operator holding the key finds a session', () => {
    const id = '3509a1a1-40d6-4dae-8f11-aabdc55d8fa0';
    const key = Buffer.from(hkdfSync('sha256', KEY, 'sluice', 'statement-application-names', 32));
    const tag = createHmac('sha256', key).update(id).digest().subarray(0, 18).toString('base64url');
    expect(new ApplicationNames(KEY).of(id)).toBe(`sluice:${tag}`);
    expect(new ApplicationNames(KEY).of(id)).toBe('sluice:IWY3z8PR7uvML1oglWa5z6DW');
  });
});
