import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { Pool } from 'pg';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { QueryPoolService } from '@app/execution';
import { HeartbeatService } from './heartbeat.service';
import { OPS_REDIS } from './ops.tokens';
import { ReadinessReport, check, report } from '@app/contracts';
import { RedisClient, pingEvery } from '@app/transport';
import { connectingWithin, ownLoginUrl } from '@app/access';

/** Can this worker take jobs: Redis and PostgreSQL answer, its heartbeat is fresh, its pool has threads. */
@Injectable()
export class WorkerReadinessService implements OnModuleDestroy {
  private readonly database: Pool;

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    @Inject(OPS_REDIS) private readonly redis: RedisClient,
    private readonly heartbeat: HeartbeatService,
    private readonly pool: QueryPoolService,
  ) {
    this.database = new Pool({
      // Never a user's function or operator in place of pg_catalog's: see ownLoginUrl.
      connectionString: config.databaseUrl && ownLoginUrl(config.databaseUrl),
      max: 1,
      Client: connectingWithin(config.pgConnectTimeoutMs),
    });
    // An idle connection that dies is replaced by the next probe, which reports any failure.
    this.database.on('error', () => undefined);
  }

  async ready(): Promise<ReadinessReport> {
    const staleAfter = this.config.workerHeartbeatMs * 3;
    const [redis, database, heartbeat, pool] = await Promise.all([
      check('redis', async () => `answered ${await pingEvery(this.redis)}`),
      check('database', async () => {
        await this.database.query('SELECT 1');
        return 'answered';
      }),
      check('heartbeat', () => {
        const age = Date.now() - this.heartbeat.lastBeatAt;
        if (this.heartbeat.lastBeatAt === 0 || age > staleAfter) {
          return Promise.reject(new Error(`no heartbeat written in the last ${staleAfter} ms`));
        }
        return Promise.resolve(`${this.heartbeat.id} beat ${age} ms ago`);
      }),
      check('pool', () => {
        const { threads } = this.pool.stats;
        return threads > 0
          ? Promise.resolve(`${threads} threads`)
          : Promise.reject(new Error('the thread pool has no threads'));
      }),
    ]);
    return report({ redis, database, heartbeat, pool });
  }

  async onModuleDestroy(): Promise<void> {
    // Fails only when already ended.
    await this.database.end().catch(() => undefined);
  }
}
