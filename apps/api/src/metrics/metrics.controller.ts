import { Controller, Get, Header } from '@nestjs/common';
import { ApiOkResponse, ApiProduces, ApiTags } from '@nestjs/swagger';
import { ApiMetricsService } from './api-metrics.service';

/** Prometheus scrape endpoint; no authentication (keep it off public listeners). */
@ApiTags('health')
@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: ApiMetricsService) {}

  @Get()
  @Header('content-type', 'text/plain; version=0.0.4; charset=utf-8')
  @Header('cache-control', 'no-store')
  @ApiProduces('text/plain')
  @ApiOkResponse({ description: 'Metrics of this api process in the Prometheus text format.' })
  scrape(): Promise<string> {
    return this.metrics.registry.metrics();
  }
}
