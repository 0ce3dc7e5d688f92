import { Inject, Injectable } from '@nestjs/common';
import { Pool } from 'pg';
import { CheckResult, ReadinessReport, check, report } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig, isStandalone } from '@app/config';
import { RedisClient, pingEvery } from '@app/transport';
import { METADATA_POOL, REDIS } from '../infra/tokens';
import { WorkerRosterService } from './worker-roster.service';

/** Can this api serve queries: Redis (cluster), the metadata PostgreSQL, a live worker. */
@Injectable()
export class ReadinessService {
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
      checks.redis = check('redis', async () => `answered ${await pingEvery(redis)}`);
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
