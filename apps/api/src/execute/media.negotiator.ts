import Negotiator from 'negotiator';
import { MEDIA_TYPES, ResultFormat } from '@app/contracts';

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
  const types = ordered.map((f) => MEDIA_TYPES[f]);
  // Common alias for newline-delimited JSON.
  const normalised = accept.replace(/application\/x-ndjson/gi, MEDIA_TYPES.ndjson);
  const chosen = new Negotiator({ headers: { accept: normalised } }).mediaType(types);
  return ordered.find((f) => MEDIA_TYPES[f] === chosen);
}
