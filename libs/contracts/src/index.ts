export * from './status';
export * from './status.redaction';
export * from './error.catalogue';
export * from './result.record';
export * from './execute.job';
export * from './media-types';
export * from './query.info';
export * from './readiness.report';
