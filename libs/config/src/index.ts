export * from './sluice.config';
export * from './config.module';
