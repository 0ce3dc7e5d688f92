import { Controller, Get, Inject } from '@nestjs/common';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { AuthMode, SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { ROLE_ISOLATION } from '../auth/role-isolation.service';
import { Status, okStatus } from '@app/contracts';
import { VERSION } from '../version';

/** Answer of GET /v1/info. */
export interface InfoResponse {
  name: string;
  version: string;
  mode: 'cluster' | 'standalone';
  /** Who users are (service: Sluice's users table; database: PostgreSQL's roles). */
  auth: AuthMode;
  /** What keeps a statement to its user's rights. */
  role_isolation: string;
  default_database: string | null;
  status: Status;
}

@ApiTags('info')
@Controller('v1/info')
export class InfoController {
  constructor(@Inject(SLUICE_CONFIG) private readonly config: SluiceConfig) {}

  @Get()
  @ApiOkResponse({
    description: 'Service name, version, mode and default database; no authentication.',
  })
  info(): InfoResponse {
    const url = this.config.databaseUrl ? new URL(this.config.databaseUrl) : undefined;
    return {
      name: 'sluice',
      version: VERSION,
      mode: this.config.redis ? 'cluster' : 'standalone',
      auth: this.config.authMode,
      role_isolation: ROLE_ISOLATION[this.config.authMode],
      default_database: url ? decodeURIComponent(url.pathname.slice(1)) || null : null,
      status: okStatus(),
    };
  }
}
