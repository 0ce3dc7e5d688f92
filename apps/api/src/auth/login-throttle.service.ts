import { Inject, Injectable, Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import { SluiceError } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { REDIS } from '../infra/tokens';
import { AttemptStore } from './attempt.store';
import { MemoryAttemptStore } from './memory-attempt.store';
import { RedisAttemptStore } from './redis-attempt.store';

/**
 * Slows down password guessing: after `SLUICE_LOGIN_MAX_FAILURES` failed logins for one user
 * name, or `SLUICE_LOGIN_MAX_FAILURES_PER_ADDRESS` from one client address, every further
 * attempt (right password or not) is refused with 429 and Retry-After until the window of
 * `SLUICE_LOGIN_LOCKOUT_SECONDS` that began with the first failure is over. Counts live in Redis
 * when there is one (shared by all api processes), in memory otherwise (standalone: one process).
 */
@Injectable()
export class LoginThrottleService {
  private readonly logger = new Logger(LoginThrottleService.name);
  private readonly store: AttemptStore;

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    @Inject(REDIS) redis: Redis | undefined,
  ) {
    this.store = redis ? new RedisAttemptStore(redis, config.keyPrefix) : new MemoryAttemptStore();
  }

  /** Refuses with 429 when the user name or the address has failed too often. */
  async check(username: string | undefined, address: string | undefined): Promise<void> {
    let waitMs = 0;
    try {
      for (const [key, limit] of this.keys(username, address)) {
        const { failures, resetInMs } = await this.store.get(key);
        if (failures >= limit) waitMs = Math.max(waitMs, resetInMs, 1);
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
      this.keys(username, address).map(([key]) =>
        this.store.add(key, this.config.loginLockoutSeconds),
      ),
    ).catch((err: unknown) =>
      this.logger.warn(`cannot count a failed login: ${(err as Error).message}`),
    );
  }

  /** A good password clears the user name's count (not the address's: others may share it). */
  async succeeded(username: string): Promise<void> {
    // Best effort: the count ends with its window anyway (SLUICE_LOGIN_LOCKOUT_SECONDS).
    await this.store.clear(`user:${username}`).catch(() => undefined);
  }

  private keys(username: string | undefined, address: string | undefined): [string, number][] {
    const keys: [string, number][] = [];
    if (username !== undefined) keys.push([`user:${username}`, this.config.loginMaxFailures]);
    const perAddress = this.config.loginMaxFailuresPerAddress;
    if (address !== undefined && perAddress > 0) keys.push([`addr:${address}`, perAddress]);
    return keys;
  }
}
