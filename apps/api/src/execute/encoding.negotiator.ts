import Negotiator from 'negotiator';
import { ContentEncoding, SluiceError } from '@app/contracts';
import { DEFAULT_COMPRESSION_LEVEL } from '@app/formats';

const ENCODINGS: readonly ContentEncoding[] = ['gzip', 'br'];

/** The compression headers of a request. */
export interface CompressionHeaders {
  acceptEncoding?: string;
  preferredEncoding?: string;
  preferredLevel?: string;
}

/**
 * The encoding and level for a response: `Preferred-Encoding` picks among what `Accept-Encoding`
 * allows; without a usable one the response is not compressed. Bad values are a 400.
 */
export function negotiateEncoding(
  headers: CompressionHeaders,
): { name: ContentEncoding; level: number } | undefined {
  let level = DEFAULT_COMPRESSION_LEVEL;
  if (headers.preferredLevel !== undefined) {
    if (!/^[1-9]$/.test(headers.preferredLevel.trim())) {
      throw new SluiceError(
        'INVALID_REQUEST',
        'Preferred-Compression-Level must be an integer from 1 to 9',
      );
    }
    level = Number(headers.preferredLevel.trim());
  }
  let preferred: ContentEncoding | undefined;
  if (headers.preferredEncoding !== undefined) {
    const name = headers.preferredEncoding.trim().toLowerCase();
    if (!ENCODINGS.includes(name as ContentEncoding)) {
      throw new SluiceError('INVALID_REQUEST', 'Preferred-Encoding must be gzip or br');
    }
    preferred = name as ContentEncoding;
  }
  if (!headers.acceptEncoding) return undefined;
  const accepted = new Negotiator({
    headers: { 'accept-encoding': headers.acceptEncoding },
  }).encodings([...ENCODINGS]) as ContentEncoding[];
  const chosen =
    preferred && accepted.includes(preferred)
      ? preferred
      : accepted.find((e) => ENCODINGS.includes(e));
  return chosen ? { name: chosen, level } : undefined;
}
