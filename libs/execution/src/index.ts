export * from './execution.module';
export * from './pool/query-pool.service';
export { ExecutionOutcome, failureStatus } from './tasks/query.runner';
export { ThreadSettings } from './tasks/thread.settings';
export * from './job.lifecycle';
export * from './query.lifecycle';
export * from './pool/pool.metrics';
export * from './session-login.resolver';
export * from './job.trace';
