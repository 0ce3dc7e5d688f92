import { ResultFormat } from '@app/contracts';
import { JsonEncoder } from './json.encoder';
import { NdjsonEncoder } from './ndjson.encoder';
import { EncoderOptions, ResultEncoder } from './result.encoder';

/** Formats this build can encode. */
export const SUPPORTED_FORMATS: readonly ResultFormat[] = ['json', 'ndjson'];

/** The encoder for a response format. */
export function createEncoder(format: ResultFormat, options: EncoderOptions): ResultEncoder {
  switch (format) {
    case 'json':
      return new JsonEncoder(options);
    case 'ndjson':
      return new NdjsonEncoder(options);
    case 'csv':
    case 'parquet':
    case 'arrow':
      throw new Error(`format ${format} is not available`);
  }
}
