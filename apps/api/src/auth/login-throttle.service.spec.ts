import Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { SluiceError } from '@app/contracts';
import type { SluiceConfig } from '@app/config';
import { testRedisUrl } from '@test/settings';
import { LoginThrottleService } from './login-throttle.service';

function throttle(redis: Redis | undefined, prefix = 'throttle-spec'): LoginThrottleService {
  const config = {
    keyPrefix: prefix,
    loginMaxFailures: 3,
    loginMaxFailuresPerAddress: 5,
    loginLockoutSeconds: 1,
  } as SluiceConfig;
  return new LoginThrottleService(config, redis);
}

async function refusal(check: Promise<void>): Promise<SluiceError> {
  const err = await check.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SluiceError);
  return err as SluiceError;
}

describe.each([['memory'], ['redis']])(`${LoginThrottleService.name} (%s)`, (store) => {
  let redis: Redis | undefined;
  const prefix = `throttle-spec-${randomBytes(4).toString('hex')}`;

  beforeAll(() => {
    if (store === 'redis') redis = new Redis(testRedisUrl);
  });
  afterAll(async () => {
    if (redis) {
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
  });

  it('refuses a user name with 429 and Retry-After after the limit, right password or not', async () => {
    const t = throttle(redis, prefix);
    for (let i = 0; i < 3; i++) {
      await t.check('alice', '10.0.0.1');
      await t.failed('alice', '10.0.0.1');
    }
    const err = await refusal(t.check('alice', '10.0.0.2'));
    expect(err.code).toBe('TOO_MANY_ATTEMPTS');
    expect(err.headers).toEqual({ 'Retry-After': '1' });
    // Another user from the same address is not locked out.
    await t.check('bob', '10.0.0.1');
  });

  it('refuses an address after its own limit, whatever the user name', async () => {
    const t = throttle(redis, prefix);
    for (let i = 0; i < 5; i++) await t.failed(`nobody-${i}`, '10.0.0.9');
    await refusal(t.check('carol', '10.0.0.9'));
    await t.check('carol', '10.0.0.10');
  });

  it('clears the user name on success, not the address', async () => {
    const t = throttle(redis, prefix);
    for (let i = 0; i < 2; i++) await t.failed('dave', '10.0.0.20');
    await t.succeeded('dave');
    for (let i = 0; i < 2; i++) await t.failed('dave', '10.0.0.20');
    await t.check('dave', '10.0.0.20'); // 2 of 3 since the success
    await t.failed('dave', '10.0.0.20');
    await refusal(t.check('dave', '10.0.0.21'));
  });

  it('counts the window from the first failure and lets in again after it', async () => {
    const t = throttle(redis, prefix);
    await t.failed('erin', undefined);
    await new Promise((r) => setTimeout(r, 600));
    await t.failed('erin', undefined);
    await t.failed('erin', undefined);
    await refusal(t.check('erin', undefined));
    // The window began with the first failure: over ~1 s after it, not after the last.
    await new Promise((r) => setTimeout(r, 550));
    await t.check('erin', undefined);
  });
});
