import { ParquetCompression, ResultFormat } from '@app/contracts';
import { CsvEncoder } from './csv.encoder';
import { DeferredHeadEncoder } from './deferred-head.encoder';
import { JsonEncoder } from './json.encoder';
import { NdjsonEncoder } from './ndjson.encoder';
import { PARQUET_CODECS, ParquetEncoder } from './parquet.encoder';
import { EncoderOptions, ResultEncoder } from './result.encoder';

/** Formats this build can encode. */
export const SUPPORTED_FORMATS: readonly ResultFormat[] = [
  'json',
  'ndjson',
  'csv',
  'parquet',
  'arrow',
];

/** The encoder for a response format (Parquet's pages compressed as asked, ZSTD by default). */
export function createEncoder(
  format: ResultFormat,
  options: EncoderOptions,
  parquetCompression: ParquetCompression = 'zstd',
): ResultEncoder {
  switch (format) {
    case 'json':
      return new JsonEncoder(options);
    case 'ndjson':
      return new NdjsonEncoder(options);
    // These cannot carry a failure in-band: their first bytes wait for the first rows.
    case 'csv':
      return new DeferredHeadEncoder(new CsvEncoder(options));
    case 'parquet':
      return new DeferredHeadEncoder(
        new ParquetEncoder(options, { codec: PARQUET_CODECS[parquetCompression] }),
      );
    case 'arrow': {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- apache-arrow is large: loaded on the first Arrow result, threads that never encode one do not hold it
      const arrow = require('./arrow.encoder') as typeof import('./arrow.encoder');
      return new DeferredHeadEncoder(new arrow.ArrowEncoder(options));
    }
  }
}
