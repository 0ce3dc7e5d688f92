import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { stopTracing } from './tracing.sdk';

/** Exports the spans still batched when the application shuts down (after every module closed). */
@Injectable()
export class TracingShutdown implements OnApplicationShutdown {
  async onApplicationShutdown(): Promise<void> {
    await stopTracing();
  }
}
