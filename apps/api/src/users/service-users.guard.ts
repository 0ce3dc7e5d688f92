import { CanActivate, Inject, Injectable } from '@nestjs/common';
import { SluiceError } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';

/** /v1/users manages sluice.users, which database users (SLUICE_AUTH=database) do not have. */
@Injectable()
export class ServiceUsersGuard implements CanActivate {
  constructor(@Inject(SLUICE_CONFIG) private readonly config: SluiceConfig) {}

  canActivate(): boolean {
    if (this.config.authMode === 'database') {
      throw new SluiceError(
        'NOT_FOUND',
        'users are PostgreSQL roles in database mode (SLUICE_AUTH=database): manage them with CREATE ROLE and ALTER ROLE',
      );
    }
    return true;
  }
}
