import { Inject, Injectable, Logger } from '@nestjs/common';
import { Pool } from 'pg';
import { CheckResult, ReadinessReport, check, report } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig, isStandalone } from '@app/config';
import { RedisClient, pingEvery } from '@app/transport';
import { METADATA_POOL, REDIS } from '../infra/tokens';
import { WorkerRosterService } from './worker-roster.service';

/** An error code safe to show (`ECONNREFUSED`, a SQLSTATE), or undefined. */
function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{2,40}$/.test(code) ? code : undefined;
}

/**
 * Can this api serve queries: Redis (cluster), the metadata PostgreSQL, a live worker. Anyone may
 * ask, on the api's own port: what Redis or PostgreSQL said when it failed (hosts, addresses,
 * login and database names) goes to the log, and the answer says only which failed and its code.
 */
@Injectable()
export class ReadinessService {
  private readonly logger = new Logger(ReadinessService.name);
  /** The last failure logged of each dependency: a probe every few seconds logs a change once. */
  private readonly logged = new Map<string, string>();

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    @Inject(REDIS) private readonly redis: RedisClient | undefined,
    @Inject(METADATA_POOL) private readonly pool: Pool,
    private readonly roster: WorkerRosterService,
  ) {}

  async ready(): Promise<ReadinessReport> {
    const checks: Record<string, Promise<CheckResult>> = {};
    if (!isStandalone(this.config) && this.redis) {
      const redis = this.redis;
      checks.redis = check(
        'redis',
        this.quiet('redis', async () => `answered ${await pingEvery(redis)}`),
      );
    }
    checks.database = check(
      'metadata database',
      this.quiet('metadata database', async () => {
        await this.pool.query('SELECT 1');
        return 'answered';
      }),
    );
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

  /** `run`, its failure logged and answered as `<what> did not answer (<code>)`. */
  private quiet(what: string, run: () => Promise<string>): () => Promise<string> {
    return () =>
      run().then(
        (detail) => {
          this.logged.delete(what);
          return detail;
        },
        (err: unknown) => {
          const message = err instanceof Error ? err.message : String(err);
          if (this.logged.get(what) !== message) {
            this.logged.set(what, message);
            this.logger.warn(`not ready: ${what}: ${message}`);
          }
          const code = codeOf(err);
          throw new Error(`${what} did not answer${code ? ` (${code})` : ''}`);
        },
      );
  }
}
