export * from './result.encoder';
export * from './json-row.writer';
export * from './json.encoder';
export * from './ndjson.encoder';
export * from './encoders';
export * from './chunk.compressor';
export * from './csv.encoder';
