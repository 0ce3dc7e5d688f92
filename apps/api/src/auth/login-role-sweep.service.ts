import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnModuleDestroy,
} from '@nestjs/common';
import type { Pool } from 'pg';
import type { LoginRoleSweep } from '@app/access';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { MetadataSchema, RoleCatalogService } from '@app/users';
import { METADATA_POOL } from '../infra/tokens';

/**
 * Service users: after a change of SLUICE_CREDENTIAL_KEY, the login roles made under the earlier
 * key (their names carry its tag) would stay for good. At start-up and every
 * SLUICE_LOGIN_ROLE_SWEEP_SECONDS, this drops those of the roles of Sluice's users that no
 * backend is logged in as: a worker still on the earlier key keeps its roles until it restarts
 * (and makes one again if it was dropped while it had no connection of it). 0 seconds: never.
 */
@Injectable()
export class LoginRoleSweepService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('LoginRoleSweep');
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** Roles already warned of as blocked: warned once a process, not at every sweep. */
  private readonly warned = new Set<string>();

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    @Inject(METADATA_POOL) private readonly pool: Pool,
    private readonly roles: RoleCatalogService,
    private readonly schema: MetadataSchema,
  ) {}

  onApplicationBootstrap(): void {
    const seconds = this.config.loginRoleSweepSeconds;
    if (this.config.authMode !== 'service' || !this.config.credentialKey || seconds === 0) return;
    this.timer = setInterval(() => this.start(), seconds * 1000);
    this.timer.unref();
    // Start-up does not wait: a slow or unreachable database is reported by readiness.
    this.start();
  }

  async onModuleDestroy(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One sweep at a time: a slow one is not stacked on by the next tick. */
  private start(): void {
    if (this.running) return;
    this.running = this.sweep()
      .catch((err: Error) => {
        this.logger.warn(`could not drop the login roles of an earlier key: ${err.message}`);
      })
      .finally(() => (this.running = undefined));
  }

  private async sweep(): Promise<void> {
    await this.schema.ensure();
    const { rows } = await this.pool.query<{ role: string }>(
      'SELECT DISTINCT role FROM sluice.users',
    );
    this.report(await this.roles.sweepLoginRoles(rows.map((r) => r.role)));
  }

  private report({ dropped, kept }: LoginRoleSweep): void {
    for (const { login, role } of dropped) {
      this.logger.log(
        `dropped login role "${login}" of role "${role}": made under an earlier ` +
          'SLUICE_CREDENTIAL_KEY, no longer used',
      );
    }
    const waiting = kept.filter((k) => k.why === 'in-use');
    if (waiting.length > 0) {
      const named = waiting.map((k) => `"${k.login}" (${k.detail ?? 'in use'})`).join(', ');
      this.logger.log(
        `login roles of an earlier SLUICE_CREDENTIAL_KEY still in use, dropped once unused ` +
          `(workers on that key must restart): ${named}`,
      );
    }
    for (const { login, role, why, detail } of kept) {
      if (why !== 'blocked' || this.warned.has(login)) continue;
      this.warned.add(login);
      this.logger.warn(
        `login role "${login}" of role "${role}", made under an earlier SLUICE_CREDENTIAL_KEY, ` +
          `cannot be dropped (${detail ?? 'refused'}). If it owns objects or holds privileges, ` +
          `a superuser can run REASSIGN OWNED BY "${login}" TO "${role}" and DROP OWNED BY ` +
          `"${login}" in each database concerned; the next sweep drops it`,
      );
    }
  }
}
