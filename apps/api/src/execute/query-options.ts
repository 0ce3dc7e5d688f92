import { SluiceError } from '@app/contracts';

const NUMERIC_FIELDS = new Set(['fetch_size', 'max_rows', 'timeout']);

/**
 * Turns query-string options (GET, or text/plain bodies) into the shape of an execute request:
 * integers where the DTO wants integers, `params` parsed from JSON. Validation happens after.
 */
export function optionsFromQuery(query: Record<string, unknown>): Record<string, unknown> {
  // No prototype: a `__proto__` or `constructor` key stays a key, refused like any unknown field.
  const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [key, value] of Object.entries(query)) {
    if (Array.isArray(value)) {
      throw new SluiceError('INVALID_REQUEST', `query parameter ${key} is given more than once`);
    }
    if (NUMERIC_FIELDS.has(key) && typeof value === 'string' && /^-?\d{1,16}$/.test(value)) {
      out[key] = Number(value);
    } else if (key === 'params' && typeof value === 'string') {
      try {
        out[key] = JSON.parse(value) as unknown;
      } catch {
        throw new SluiceError('INVALID_REQUEST', 'params must be a JSON object');
      }
    } else {
      out[key] = value;
    }
  }
  return out;
}
