import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { ConfigError, SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { MetadataEventsService } from './metadata-events.service';
import { MetadataSchema } from './metadata.schema';
import { hashPassword, verifyPassword } from './password.hasher';
import { RoleCatalogService } from './role-catalog.service';
import { UsersService } from './users.service';
import { METADATA_POOL } from './users.tokens';

/**
 * The api's SLUICE_ADMIN_USER, made or restored as the api starts: the way back in. The api's
 * own, apart from UsersService, so that `sluice users` (built by the same UserAdminModule)
 * changes no user but the one it is asked to.
 */
@Injectable()
export class AdminBootstrapService implements OnModuleInit {
  private readonly logger = new Logger(AdminBootstrapService.name);

  constructor(
    @Inject(METADATA_POOL) private readonly pool: Pool,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    private readonly schema: MetadataSchema,
    private readonly events: MetadataEventsService,
    private readonly roles: RoleCatalogService,
    private readonly users: UsersService,
  ) {}

  async onModuleInit(): Promise<void> {
    const { adminUser, adminPassword } = this.config;
    if (!adminUser || adminPassword === undefined) return;
    if (this.config.authMode === 'database') {
      // Database users are PostgreSQL's roles: administrators are members of SLUICE_ADMIN_ROLE.
      this.logger.warn(
        'SLUICE_ADMIN_USER and SLUICE_ADMIN_PASSWORD are ignored with SLUICE_AUTH=database',
      );
      return;
    }
    const role = this.config.adminRole;
    // The control login may create roles: the admin's statements must never run as it.
    if (!role) throw new ConfigError('SLUICE_ADMIN_ROLE', 'is required with SLUICE_ADMIN_USER');
    await this.schema.ensure();
    await this.roles.provision(role);
    const existing = await this.users.find(adminUser);
    const samePassword =
      existing !== undefined && (await verifyPassword(adminPassword, existing.passwordHash));
    // The bootstrap admin is the way back in: start-up restores its password, role and rights.
    if (
      existing &&
      samePassword &&
      existing.role === role &&
      existing.isAdmin &&
      existing.enabled
    ) {
      return;
    }
    await this.pool.query(
      `INSERT INTO sluice.users (username, password_hash, role, is_admin, token_generation)
       VALUES ($1, $2, $3, true, $4)
       ON CONFLICT (username) DO UPDATE
         SET password_hash = EXCLUDED.password_hash, role = EXCLUDED.role, is_admin = true,
             enabled = true, token_generation = EXCLUDED.token_generation, updated_at = now()`,
      [
        adminUser,
        await hashPassword(adminPassword),
        role,
        samePassword ? existing.tokenGeneration : randomUUID(),
      ],
    );
    this.users.forget(adminUser);
    // Best effort: other processes cache a user a few seconds at most.
    await this.events.publish({ kind: 'user', username: adminUser }).catch(() => undefined);
    this.logger.log(`admin user "${adminUser}" runs statements as role "${role}"`);
  }
}
