import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { stopTracing } from '@app/tracing';

/**
 * Exports the spans still batched when the application shuts down (after every module closed).
 * The worker's own, not libs/tracing's: the pool's threads load that lib, and must load no NestJS.
 */
@Injectable()
export class TracingShutdown implements OnApplicationShutdown {
  async onApplicationShutdown(): Promise<void> {
    await stopTracing();
  }
}
