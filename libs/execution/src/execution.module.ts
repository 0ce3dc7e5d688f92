import { Module } from '@nestjs/common';
import { QueryPoolService } from './pool/query-pool.service';
import { SessionLoginResolver } from './session-login.resolver';

/** The thread pool that runs statements and encodes results; used by the worker and standalone. */
@Module({
  providers: [QueryPoolService, SessionLoginResolver],
  exports: [QueryPoolService, SessionLoginResolver],
})
export class ExecutionModule {}
