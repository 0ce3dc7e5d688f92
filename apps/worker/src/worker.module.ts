import { DynamicModule, Module } from '@nestjs/common';
import { ConfigModule, SluiceConfig } from '@app/config';
import { WorkerOpsModule } from './health/worker-ops.module';
import { ExecuteProcessor } from './jobs/execute.processor';
import { ExecutionModule } from '@app/execution';
import { TracingShutdown } from './tracing/tracing.shutdown';

/** The worker process: a BullMQ consumer in front of a piscina pool; no HTTP. */
@Module({})
export class WorkerModule {
  static forRoot(config: SluiceConfig): DynamicModule {
    return {
      module: WorkerModule,
      imports: [ConfigModule.forRoot(config), ExecutionModule, WorkerOpsModule],
      providers: [ExecuteProcessor, TracingShutdown],
    };
  }
}
