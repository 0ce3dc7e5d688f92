import { Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import type { Pool } from 'pg';
import { LoginRoleError } from '@app/access';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { MetadataSchema, RoleCatalogService } from '@app/users';
import { METADATA_POOL } from '../infra/tokens';

/** How statements are kept to their user's rights: what /v1/info and the start-up log say. */
export const ROLE_ISOLATION = {
  service: 'login role per user role',
  database: "each database user's own login",
} as const;

/**
 * At start-up: says which isolation is in force, warns loudly about any setting that lets one
 * user's statements reach another's role, and (service users) makes sure every user role in
 * sluice.users has its login role — users made before this version, or by hand, included.
 */
@Injectable()
export class RoleIsolationService implements OnApplicationBootstrap {
  private readonly logger = new Logger('RoleIsolation');

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    @Inject(METADATA_POOL) private readonly pool: Pool,
    private readonly roles: RoleCatalogService,
    private readonly schema: MetadataSchema,
  ) {}

  onApplicationBootstrap(): void {
    this.logger.log(
      `users: ${this.config.authMode}; statements run over ${ROLE_ISOLATION[this.config.authMode]}`,
    );
    // Start-up does not wait: a slow or unreachable database is reported by readiness.
    void this.review().catch((err: Error) =>
      this.logger.warn(`ROLE ISOLATION: could not check the roles: ${err.message}`),
    );
  }

  private async review(): Promise<void> {
    const control = await this.roles.controlLogin();
    if (control.superuser) {
      this.logger.warn(
        `ROLE ISOLATION: DATABASE_URL logs in as superuser "${control.role}". It runs no user's ` +
          'statement, but a leaked DATABASE_URL then reaches everything: give it CREATEROLE and ' +
          'pg_signal_backend only (README, "Role isolation")',
      );
    } else if (!control.createrole) {
      this.logger.warn(
        `ROLE ISOLATION: "${control.role}" (DATABASE_URL) lacks CREATEROLE: Sluice cannot create ` +
          'login roles for new user roles',
      );
    }
    if (!(await this.roles.controlPasswordAsked())) {
      const consequence =
        this.config.authMode === 'database'
          ? "so it checks no database user's password either: every login is refused"
          : 'so anyone who reaches the server may log in as any role, login roles included';
      this.logger.warn(
        `ROLE ISOLATION: PostgreSQL let "${control.role}" (DATABASE_URL) in without asking for ` +
          `a password: its pg_hba.conf trusts Sluice's connections, ${consequence}. Use ` +
          'scram-sha-256 for them (README, "Role isolation")',
      );
    }
    if (!control.signal) {
      this.logger.warn(
        `ROLE ISOLATION: "${control.role}" (DATABASE_URL) is not a member of pg_signal_backend: ` +
          'cancels and time limits cannot stop a running statement',
      );
    }
    if (this.config.authMode !== 'service') return;
    await this.schema.ensure();
    const { rows } = await this.pool.query<{ role: string }>(
      'SELECT DISTINCT role FROM sluice.users ORDER BY role',
    );
    for (const { role } of rows) {
      try {
        // A user may have given its login role a password of its own (ALTER ROLE session_user
        // PASSWORD, after RESET ROLE) to log in outside Sluice: it goes at every start.
        await this.roles.provision(role, { resetPassword: true });
      } catch (err) {
        const why = err instanceof LoginRoleError ? err.message : (err as Error).message;
        this.logger.warn(`ROLE ISOLATION: users of role "${role}" cannot run statements: ${why}`);
      }
    }
  }
}
