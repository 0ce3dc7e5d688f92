import { getMetadataStorage } from 'class-validator';
import { SluiceError } from '@app/contracts';
import { ExecuteRequestDto } from '@app/http-contracts';

/** The fields of ExecuteRequestDto that its validation checks with `constraint` (`isInt`, …). */
function fieldsCheckedBy(constraint: string): Set<string> {
  const checks = getMetadataStorage().getTargetValidationMetadatas(
    ExecuteRequestDto,
    '',
    true,
    false,
  );
  return new Set(checks.filter((c) => c.name === constraint).map((c) => c.propertyName));
}

// From the DTO's own decorators, so that a field added there is read from the query string too.
const NUMERIC_FIELDS = fieldsCheckedBy('isInt');
const BOOLEAN_FIELDS = fieldsCheckedBy('isBoolean');

/**
 * Turns query-string options (GET, or text/plain bodies) into the shape of an execute request:
 * integers where the DTO wants integers, `true`/`false` where it wants booleans, `params` parsed
 * from JSON. Validation happens after.
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
    } else if (BOOLEAN_FIELDS.has(key) && (value === 'true' || value === 'false')) {
      out[key] = value === 'true';
    } else if (key === 'params' && typeof value === 'string') {
      // Its text has had the checks of a JSON body before any parser ran (request.input.ts).
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

/**
 * A text/plain execute request: the body is the statement, the other fields come from the query
 * string. A `statement` there too would be a second statement, one of them silently dropped.
 */
export function textBodyRequest(
  query: Record<string, unknown>,
  body: string,
): Record<string, unknown> {
  const options = optionsFromQuery(query);
  if (Object.hasOwn(options, 'statement')) {
    throw new SluiceError(
      'INVALID_REQUEST',
      'statement is the body of a text/plain request: leave it out of the query string',
    );
  }
  return { ...options, statement: body };
}
