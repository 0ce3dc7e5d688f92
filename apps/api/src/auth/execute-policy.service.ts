import { Inject, Injectable, Logger } from '@nestjs/common';
import { SluiceError } from '@app/contracts';
import { ExecuteRequestDto } from '@app/http-contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { roleChangeOf } from '@app/sql';
import { RoleCatalogService } from '@app/users';
import { challenge } from './auth.challenge';
import { AuthUser } from './auth-user';
import { enforceRequestLimits } from './request.limits';

/**
 * What is checked about an execute request before anything is queued: the configured limits,
 * no role-changing command, and CONNECT on the target database for the user's role.
 */
@Injectable()
export class ExecutePolicyService {
  private readonly logger = new Logger(ExecutePolicyService.name);

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    private readonly roles: RoleCatalogService,
  ) {}

  /** Throws the error to answer with; resolves when the request may be queued. */
  async check(request: Readonly<ExecuteRequestDto>, user: AuthUser): Promise<void> {
    const named = request.database ?? user.database;
    enforceRequestLimits(request, this.config, named);
    // Mapped before the login-role provisioner refused PostgreSQL's predefined roles: its login
    // may still hold one (COPY … TO PROGRAM, the server's files, every table).
    if (user.role.startsWith('pg_')) {
      throw new SluiceError(
        'FORBIDDEN',
        `the role of this user, "${user.role}", is one of PostgreSQL's predefined roles, which Sluice does not grant: an administrator must give the user a role of its own`,
      );
    }
    const change = roleChangeOf(request.statement);
    if (change) {
      throw new SluiceError(
        'ROLE_CHANGE',
        `${change} is not allowed: every statement runs as the role of its user`,
      );
    }
    const database = named ?? this.roles.defaultDatabase;
    if (database !== undefined) await this.requireConnect(user.role, database);
  }

  private async requireConnect(role: string, database: string): Promise<void> {
    let access;
    try {
      access = await this.roles.databaseAccess(role, database);
    } catch (err) {
      this.logger.warn(`cannot check CONNECT on "${database}": ${(err as Error).message}`);
      throw new SluiceError('DB_UNAVAILABLE', 'cannot check database privileges');
    }
    switch (access) {
      case 'ok':
      case 'no-database':
        // An unknown database is reported by the worker, like any connection failure.
        return;
      case 'no-role':
        // A database user whose role was dropped can no longer log in at all.
        if (this.config.authMode === 'database') {
          const reason = `role "${role}" no longer exists`;
          throw new SluiceError(
            'LOGIN_REFUSED',
            reason,
            undefined,
            challenge('invalid_token', reason),
          );
        }
        throw new SluiceError('FORBIDDEN', 'the role of this user no longer exists');
      case 'no-connect':
        throw new SluiceError(
          'FORBIDDEN',
          `role "${role}" may not connect to database "${database}"`,
        );
    }
  }
}
