export * from './client.types';
export * from './sluice-client.error';
export * from './sluice.client';
