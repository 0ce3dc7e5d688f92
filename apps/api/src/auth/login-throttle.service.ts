import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  RateLimiterMemory,
  RateLimiterRedis,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import { SluiceError } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { RedisClient } from '@app/transport';
import { REDIS } from '../infra/tokens';

/**
 * Slows down password guessing: after `SLUICE_LOGIN_MAX_FAILURES` failed logins for one user
 * name, or `SLUICE_LOGIN_MAX_FAILURES_PER_ADDRESS` from one client address, every further
 * attempt (right password or not) is refused with 429 and Retry-After until the window of
 * `SLUICE_LOGIN_LOCKOUT_SECONDS` that began with the first failure is over. Counted by
 * rate-limiter-flexible: in Redis when there is one (shared by all api processes), in memory
 * otherwise (standalone: one process).
 */
@Injectable()
export class LoginThrottleService {
  private readonly logger = new Logger(LoginThrottleService.name);
  private readonly perUser: RateLimiterAbstract;
  private readonly perAddress: RateLimiterAbstract | undefined;

  constructor(
    @Inject(SLUICE_CONFIG) config: SluiceConfig,
    @Inject(REDIS) redis: RedisClient | undefined,
  ) {
    // A fixed window from a key's first failure: failures are counted with penalty(), which
    // never refuses, and the limit is checked by check() before the password is.
    const limiter = (points: number): RateLimiterAbstract => {
      // Keys `<prefix>:login:{user:…}`: under the deployment's prefix, one slot per key.
      const options = {
        keyPrefix: `${config.keyPrefix}:login`,
        points,
        duration: config.loginLockoutSeconds,
      };
      return redis
        ? new RateLimiterRedis({ ...options, storeClient: redis })
        : new RateLimiterMemory(options);
    };
    this.perUser = limiter(config.loginMaxFailures);
    const perAddress = config.loginMaxFailuresPerAddress;
    this.perAddress = perAddress > 0 ? limiter(perAddress) : undefined;
  }

  /** Refuses with 429 when the user name or the address has failed too often. */
  async check(username: string | undefined, address: string | undefined): Promise<void> {
    let waitMs = 0;
    try {
      for (const [limiter, key] of this.keys(username, address)) {
        const count = await limiter.get(key);
        // msBeforeNext ≤ 0: the memory store's window is over, its timer not run yet.
        if (count !== null && count.msBeforeNext > 0 && count.consumedPoints >= limiter.points) {
          waitMs = Math.max(waitMs, count.msBeforeNext);
        }
      }
    } catch (err) {
      // Counting is a brake, not a gate: an unreachable store must not stop every login.
      this.logger.warn(`cannot read failed logins: ${(err as Error).message}`);
      return;
    }
    if (waitMs > 0) {
      const seconds = Math.ceil(waitMs / 1000);
      throw new SluiceError(
        'TOO_MANY_ATTEMPTS',
        `too many failed logins; try again in ${seconds} s`,
        undefined,
        { 'Retry-After': String(seconds) },
      );
    }
  }

  async failed(username: string | undefined, address: string | undefined): Promise<void> {
    await Promise.all(
      this.keys(username, address).map(([limiter, key]) => limiter.penalty(key, 1)),
    ).catch((err: unknown) =>
      this.logger.warn(`cannot count a failed login: ${(err as Error).message}`),
    );
  }

  /** A good password clears the user name's count (not the address's: others may share it). */
  async succeeded(username: string): Promise<void> {
    // Best effort: the count ends with its window anyway (SLUICE_LOGIN_LOCKOUT_SECONDS).
    await this.perUser.delete(userKey(username)).catch(() => undefined);
  }

  private keys(
    username: string | undefined,
    address: string | undefined,
  ): [RateLimiterAbstract, string][] {
    const keys: [RateLimiterAbstract, string][] = [];
    if (username !== undefined) keys.push([this.perUser, userKey(username)]);
    if (address !== undefined && this.perAddress) keys.push([this.perAddress, `{addr:${address}}`]);
    return keys;
  }
}

// In braces: the Redis Cluster hash tag, as each key is used alone.
function userKey(username: string): string {
  return `{user:${username}}`;
}
