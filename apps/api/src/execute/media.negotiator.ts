import Negotiator from 'negotiator';
import { MEDIA_TYPES, ResultFormat } from '@app/contracts';

/**
 * Formats sent as UTF-8 text, whose Content-Type says `charset=utf-8`: an Accept range naming
 * that charset (`application/json; charset=utf-8`, the very type of the answer) matches them.
 */
const TEXT_FORMATS: ReadonlySet<ResultFormat> = new Set<ResultFormat>(['json', 'ndjson', 'csv']);

/** The type offered to the negotiator: with the charset a range may name, for text formats. */
const offered = (format: ResultFormat): string =>
  TEXT_FORMATS.has(format) ? `${MEDIA_TYPES[format]}; charset=utf-8` : MEDIA_TYPES[format];

/**
 * The response format for an Accept header, among those this build encodes; undefined when the
 * client accepts none of them (406). No header means application/json.
 */
export function negotiateFormat(
  accept: string | undefined,
  available: readonly ResultFormat[],
): ResultFormat | undefined {
  if (accept === undefined || accept.trim() === '') return 'json';
  // Listing JSON first makes `*/*` and `application/*` pick it.
  const ordered = [...available].sort((a, b) => (a === 'json' ? -1 : b === 'json' ? 1 : 0));
  const types = ordered.map(offered);
  // Common alias for newline-delimited JSON.
  const normalised = accept.replace(/application\/x-ndjson/gi, MEDIA_TYPES.ndjson);
  const chosen = new Negotiator({ headers: { accept: normalised } }).mediaType(types);
  return ordered.find((f) => offered(f) === chosen);
}
