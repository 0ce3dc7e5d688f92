import { ResultFormat } from './execute.job';

/** Response media types the service can produce, by format. */
export const MEDIA_TYPES: Record<ResultFormat, string> = {
  json: 'application/json',
  ndjson: 'application/stream+json',
  csv: 'text/csv',
  parquet: 'application/parquet',
  arrow: 'application/vnd.apache.arrow.stream',
};
