import { DynamicModule, Module } from '@nestjs/common';
import { ConfigModule, SluiceConfig } from '@app/config';
import { ExecuteProcessor } from './jobs/execute.processor';
import { QueryPoolService } from './pool/query-pool.service';

/** The worker process: a BullMQ consumer in front of a piscina pool; no HTTP. */
@Module({})
export class WorkerModule {
  static forRoot(config: SluiceConfig): DynamicModule {
    return {
      module: WorkerModule,
      imports: [ConfigModule.forRoot(config)],
      providers: [QueryPoolService, ExecuteProcessor],
    };
  }
}
