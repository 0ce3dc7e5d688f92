import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  RateLimiterMemory,
  RateLimiterRedis,
  type RateLimiterAbstract,
  type RateLimiterRes,
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
    // A fixed window from a key's first count: attempts are counted with penalty(), which never
    // refuses and never moves the window, and refused by attempt() past the limit.
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

  /**
   * Counts a login attempt before its password is checked, and refuses it with 429 when the user
   * name or the address had its limit already. Counted first, in one atomic step per key: read
   * before the check and counted after it, a burst of concurrent guesses all passed the read (40
   * guesses at once got through a limit of 5). A refused attempt stays counted, which changes
   * nothing: the window is fixed from its first count. Each attempt let through ends with
   * `succeeded` or `abandoned`; a wrong password leaves it counted.
   */
  async attempt(username: string | undefined, address: string | undefined): Promise<void> {
    const keys = this.keys(username, address);
    const counted = await Promise.allSettled(keys.map(([limiter, key]) => limiter.penalty(key, 1)));
    let waitMs = 0;
    counted.forEach((result, i) => {
      if (result.status === 'rejected') {
        // Counting is a brake, not a gate: an unreachable store must not stop every login.
        this.logger.warn(`cannot count a login: ${(result.reason as Error).message}`);
        return;
      }
      const res: RateLimiterRes = result.value;
      // msBeforeNext ≤ 0: the memory store's window is over, its timer not run yet.
      if (res.msBeforeNext > 0 && res.consumedPoints > keys[i][0].points) {
        waitMs = Math.max(waitMs, res.msBeforeNext);
      }
    });
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

  /**
   * A good password: clears the user name's count, and gives the address back the attempt's point
   * (not its failures: others may share the address).
   */
  async succeeded(username: string, address: string | undefined): Promise<void> {
    // Best effort: the count ends with its window anyway (SLUICE_LOGIN_LOCKOUT_SECONDS).
    await Promise.all([
      this.perUser.delete(userKey(username)),
      ...this.keys(undefined, address).map(([limiter, key]) => limiter.reward(key, 1)),
    ]).catch(() => undefined);
  }

  /** The attempt ended before its password was judged (the store was unreachable): uncounted. */
  async abandoned(username: string | undefined, address: string | undefined): Promise<void> {
    // Best effort, as above: the store was unreachable already; the attempt's count ends with
    // its window.
    await Promise.all(
      this.keys(username, address).map(([limiter, key]) => limiter.reward(key, 1)),
    ).catch(() => undefined);
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
