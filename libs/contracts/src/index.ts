export * from './status';
export * from './error.catalogue';
export * from './result.record';
export * from './execute.job';
export * from './media-types';
export * from './execute-request.dto';
export * from './login.dto';
export * from './query.info';
