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

  // Each attempt is counted as it begins; one that fails stays counted.
  const fail = (t: LoginThrottleService, user: string | undefined, address: string | undefined) =>
    t.attempt(user, address);

  it('refuses a user name with 429 and Retry-After after the limit, right password or not', async () => {
    const t = throttle(redis, prefix);
    for (let i = 0; i < 3; i++) await fail(t, 'alice', '10.0.0.1');
    const err = await refusal(t.attempt('alice', '10.0.0.2'));
    expect(err.code).toBe('TOO_MANY_ATTEMPTS');
    expect(err.headers).toEqual({ 'Retry-After': '1' });
    // Another user from the same address is not locked out.
    await t.attempt('bob', '10.0.0.1');
  });

  it('lets no more attempts through than the limit when they come at once', async () => {
    const t = throttle(redis, prefix);
    // Read before the password check and counted after it, all ten got through.
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) => t.attempt('mallory', `10.0.1.${i}`)),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
    const refused = results.filter((r) => r.status === 'rejected');
    expect(refused).toHaveLength(7);
    for (const r of refused) expect((r.reason as SluiceError).code).toBe('TOO_MANY_ATTEMPTS');
    // So do an address's.
    const fromOne = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) => t.attempt(`user-${i}`, '10.0.2.1')),
    );
    expect(fromOne.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
  });

  it('refuses an address after its own limit, whatever the user name', async () => {
    const t = throttle(redis, prefix);
    for (let i = 0; i < 5; i++) await fail(t, `nobody-${i}`, '10.0.0.9');
    await refusal(t.attempt('carol', '10.0.0.9'));
    await t.attempt('carol', '10.0.0.10');
  });

  it('clears the user name on success, and gives the address back only that attempt', async () => {
    const t = throttle(redis, prefix);
    for (let i = 0; i < 2; i++) await fail(t, 'dave', '10.0.0.20');
    await t.attempt('dave', '10.0.0.20');
    await t.succeeded('dave', '10.0.0.20');
    for (let i = 0; i < 3; i++) await fail(t, 'dave', '10.0.0.20'); // 3 of 3 since the success
    await refusal(t.attempt('dave', '10.0.0.21'));
    // The address holds its five failures, not the success: a sixth name is refused.
    await refusal(t.attempt('frank', '10.0.0.20'));
  });

  it('gives an abandoned attempt back', async () => {
    const t = throttle(redis, prefix);
    for (let i = 0; i < 5; i++) {
      await t.attempt('grace', '10.0.0.30');
      await t.abandoned('grace', '10.0.0.30');
    }
    await t.attempt('grace', '10.0.0.30');
  });

  it('counts the window from the first failure and lets in again after it', async () => {
    const t = throttle(redis, prefix);
    await fail(t, 'erin', undefined);
    await new Promise((r) => setTimeout(r, 600));
    await fail(t, 'erin', undefined);
    await fail(t, 'erin', undefined);
    await refusal(t.attempt('erin', undefined));
    // The window began with the first failure: over ~1 s after it, not after the last.
    await new Promise((r) => setTimeout(r, 550));
    await t.attempt('erin', undefined);
  });
});
