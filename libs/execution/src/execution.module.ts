import { Module } from '@nestjs/common';
import { QueryPoolService } from './pool/query-pool.service';

/** The thread pool that runs statements and encodes results; used by the worker and standalone. */
@Module({
  providers: [QueryPoolService],
  exports: [QueryPoolService],
})
export class ExecutionModule {}
