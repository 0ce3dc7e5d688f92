export * from './placeholder.binder';
export * from './type.info';
export * from './type.catalog';
export * from './json-value.encoder';
export * from './json-value.writer';
export * from './iso-date.check';
export * from './role-change.detector';
