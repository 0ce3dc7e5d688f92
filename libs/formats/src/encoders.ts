import { ResultFormat } from '@app/contracts';
import { CsvEncoder } from './csv.encoder';
import { JsonEncoder } from './json.encoder';
import { NdjsonEncoder } from './ndjson.encoder';
import { EncoderOptions, ResultEncoder } from './result.encoder';

/** Formats this build can encode. */
export const SUPPORTED_FORMATS: readonly ResultFormat[] = ['json', 'ndjson', 'csv'];

/** The encoder for a response format. */
export function createEncoder(format: ResultFormat, options: EncoderOptions): ResultEncoder {
  switch (format) {
    case 'json':
      return new JsonEncoder(options);
    case 'ndjson':
      return new NdjsonEncoder(options);
    case 'csv':
      return new CsvEncoder(options);
    case 'parquet':
    case 'arrow':
      throw new Error(`format ${format} is not available`);
  }
}
