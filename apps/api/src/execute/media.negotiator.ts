import Negotiator from 'negotiator';
import {
  MEDIA_TYPES,
  PARQUET_COMPRESSIONS,
  ParquetCompression,
  ResultFormat,
  SluiceError,
} from '@app/contracts';

/**
 * Formats sent as UTF-8 text, whose Content-Type says `charset=utf-8`: an Accept range naming
 * that charset (`application/json; charset=utf-8`, the very type of the answer) matches them.
 */
const TEXT_FORMATS: ReadonlySet<ResultFormat> = new Set<ResultFormat>(['json', 'ndjson', 'csv']);

/**
 * The Content-Type of a result in `format`, with the charset for text formats: also the type
 * offered to the negotiator, whose Accept range may name that charset.
 */
export const contentTypeOf = (format: ResultFormat): string =>
  TEXT_FORMATS.has(format) ? `${MEDIA_TYPES[format]}; charset=utf-8` : MEDIA_TYPES[format];

// `compression=<codec>` among a range's parameters (value maybe quoted, as RFC 9110 allows).
const COMPRESSION_PARAMETER = /^\s*compression\s*=\s*"?([^"]*)"?\s*$/i;

// A separator outside double quotes (a quoted parameter value may hold either).
const outsideQuotes = (separator: string) => new RegExp(`${separator}(?=(?:[^"]*"[^"]*")*[^"]*$)`);
const RANGE_SEPARATOR = outsideQuotes(',');
const PARAMETER_SEPARATOR = outsideQuotes(';');

/** An Accept header without the `compression` parameters of its application/parquet ranges. */
interface ParquetAccept {
  accept: string;
  /** The first such parameter's value, as given. */
  compression: string | undefined;
}

/**
 * Takes `compression=…` off the application/parquet ranges of an Accept header: the negotiator
 * matches a range's parameters against the offered type's, and the type is offered without it.
 */
function takeParquetCompression(accept: string): ParquetAccept {
  let compression: string | undefined;
  const ranges = accept.split(RANGE_SEPARATOR).map((range) => {
    const [type, ...parameters] = range.split(PARAMETER_SEPARATOR);
    if (type.trim().toLowerCase() !== MEDIA_TYPES.parquet) return range;
    const kept = parameters.filter((p) => {
      const match = COMPRESSION_PARAMETER.exec(p);
      if (match) compression ??= match[1];
      return !match;
    });
    return [type, ...kept].join(';');
  });
  return { accept: ranges.join(','), compression };
}

/**
 * The codec of a Parquet answer's pages: the `compression` parameter of the Accept header's
 * application/parquet range (`zstd`, `snappy`, `gzip`, `none`), zstd without one. An unknown
 * value is 406, naming the values accepted.
 */
export function negotiateParquetCompression(accept: string | undefined): ParquetCompression {
  const given = accept === undefined ? undefined : takeParquetCompression(accept).compression;
  if (given === undefined) return 'zstd';
  const value = given.trim().toLowerCase();
  const known = PARQUET_COMPRESSIONS.find((c) => c === value);
  if (known === undefined) {
    throw new SluiceError(
      'NOT_ACCEPTABLE',
      `unknown Parquet compression '${given}'; accepted: compression=${PARQUET_COMPRESSIONS.join('|')}`,
    );
  }
  return known;
}

/** Accept headers seen most recently, with the format each chose (undefined: none: 406). */
const FORMATS_CHOSEN = new Map<string, ResultFormat | undefined>();
/** Past this many headers, those remembered are forgotten and remembered anew. */
const MOST_REMEMBERED = 256;

/**
 * The response format for an Accept header, among those this build encodes; undefined when the
 * client accepts none of them (406). No header means application/json.
 */
export function negotiateFormat(
  accept: string | undefined,
  available: readonly ResultFormat[],
): ResultFormat | undefined {
  if (accept === undefined || accept.trim() === '') return 'json';
  // A client sends the same Accept with each request: its answer is looked up, not parsed again.
  const key = `${available.join(',')}\n${accept}`;
  if (FORMATS_CHOSEN.has(key)) return FORMATS_CHOSEN.get(key);
  const chosen = chooseFormat(accept, available);
  if (FORMATS_CHOSEN.size >= MOST_REMEMBERED) FORMATS_CHOSEN.clear();
  FORMATS_CHOSEN.set(key, chosen);
  return chosen;
}

function chooseFormat(
  accept: string,
  available: readonly ResultFormat[],
): ResultFormat | undefined {
  // Listing JSON first makes `*/*` and `application/*` pick it.
  const ordered = [...available].sort((a, b) => (a === 'json' ? -1 : b === 'json' ? 1 : 0));
  const types = ordered.map(contentTypeOf);
  // Common alias for newline-delimited JSON.
  const normalised = takeParquetCompression(accept).accept.replace(
    /application\/x-ndjson/gi,
    MEDIA_TYPES.ndjson,
  );
  const chosen = new Negotiator({ headers: { accept: normalised } }).mediaType(types);
  return ordered.find((f) => contentTypeOf(f) === chosen);
}
