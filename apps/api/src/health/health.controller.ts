import { Controller, Get, Res } from '@nestjs/common';
import { ApiOkResponse, ApiServiceUnavailableResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { ReadinessReport, Status, okStatus } from '@app/contracts';
import { ReadinessService } from './readiness.service';

/** Probes for load balancers and orchestrators; no authentication. */
@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(private readonly readiness: ReadinessService) {}

  @Get('live')
  @ApiOkResponse({ description: 'The process is up and its event loop answers.' })
  live(): { status: Status } {
    return { status: okStatus('live') };
  }

  @Get('ready')
  @ApiOkResponse({
    description:
      'Redis (cluster), the metadata PostgreSQL and at least one worker answered: `{status, checks}`.',
  })
  @ApiServiceUnavailableResponse({
    description:
      'Not ready: the envelope (57P03, -109) names each failed check; `checks` has them all.',
  })
  async ready(@Res({ passthrough: true }) reply: FastifyReply): Promise<ReadinessReport> {
    const report = await this.readiness.ready();
    if (report.status.vendor_code !== 0) void reply.code(503);
    void reply.header('cache-control', 'no-store');
    return report;
  }
}
