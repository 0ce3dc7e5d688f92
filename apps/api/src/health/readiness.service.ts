import { Inject, Injectable } from '@nestjs/common';
import type Redis from 'ioredis';
import { Pool } from 'pg';
import { ERROR_CATALOGUE, Status, okStatus } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig, isStandalone } from '@app/config';
import { METADATA_POOL, REDIS } from '../infra/tokens';
import { WorkerRosterService } from './worker-roster.service';

/** How long one dependency may take to answer before it counts as down (ms). */
const CHECK_TIMEOUT_MS = 2_000;

/** Outcome of one readiness check. */
export interface CheckResult {
  ok: boolean;
  /** What was found, or why it failed. */
  detail: string;
  ms: number;
}

/** Answer of GET /health/ready (also the body of its 503). */
export interface ReadinessReport {
  status: Status;
  checks: Record<string, CheckResult>;
}

/** Resolves with `work`, or rejects once `ms` have passed. */
async function within<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs a check, timing it; a throw or a timeout is a failed check with the reason. */
export async function check(what: string, run: () => Promise<string>): Promise<CheckResult> {
  const started = Date.now();
  try {
    const detail = await within(run(), CHECK_TIMEOUT_MS, what);
    return { ok: true, detail, ms: Date.now() - started };
  } catch (err) {
    return { ok: false, detail: (err as Error).message, ms: Date.now() - started };
  }
}

/** The report for a set of checks: OK, or 57P03 naming every check that failed. */
export function report(checks: Record<string, CheckResult>): ReadinessReport {
  const failed = Object.entries(checks).filter(([, c]) => !c.ok);
  if (failed.length === 0) return { status: okStatus('ready'), checks };
  const entry = ERROR_CATALOGUE.UNAVAILABLE;
  return {
    status: {
      reason: `not ready: ${failed.map(([name, c]) => `${name}: ${c.detail}`).join('; ')}`,
      sql_state: entry.sqlState,
      vendor_code: entry.vendorCode,
    },
    checks,
  };
}

/** Can this api serve queries: Redis (cluster), the metadata PostgreSQL, a live worker. */
@Injectable()
export class ReadinessService {
  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    @Inject(REDIS) private readonly redis: Redis | undefined,
    @Inject(METADATA_POOL) private readonly pool: Pool,
    private readonly roster: WorkerRosterService,
  ) {}

  async ready(): Promise<ReadinessReport> {
    const checks: Record<string, Promise<CheckResult>> = {};
    if (!isStandalone(this.config) && this.redis) {
      const redis = this.redis;
      checks.redis = check('redis', async () => `answered ${await redis.ping()}`);
    }
    checks.database = check('metadata database', async () => {
      await this.pool.query('SELECT 1');
      return 'answered';
    });
    checks.workers = check('workers', async () => {
      const alive = await this.roster.alive();
      if (alive.length === 0) {
        throw new Error(`no worker seen in the last ${this.roster.staleAfterMs} ms`);
      }
      return isStandalone(this.config)
        ? 'in-process thread pool'
        : `${alive.length} seen in the last ${this.roster.staleAfterMs} ms`;
    });
    const names = Object.keys(checks);
    const results = await Promise.all(Object.values(checks));
    return report(Object.fromEntries(names.map((name, i) => [name, results[i]])));
  }
}
