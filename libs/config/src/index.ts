export * from './sluice.config';
export * from './config.module';
export * from './heap.growth';
export * from './allowed-hosts';
