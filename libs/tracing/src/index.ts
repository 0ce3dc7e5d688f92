export * from './tracing.sdk';
export * from './sql.comment';
export * from './job.context';
export * from './span.status';
