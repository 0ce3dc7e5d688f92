import { Lane, ResultFormat } from '@app/contracts';

/** Bulk answers: written for a file or a data frame, not for a person waiting on a screen. */
const EXPORT_FORMATS = new Set<ResultFormat>(['parquet', 'arrow']);

/**
 * The lane a query waits in: the one the request names (validated with its other fields),
 * otherwise `export` for Parquet and Arrow answers and `interactive` for every other format.
 */
export function laneOf(format: ResultFormat, requested?: Lane): Lane {
  return requested ?? (EXPORT_FORMATS.has(format) ? 'export' : 'interactive');
}
