import { SluiceError } from '@app/contracts';
import { ExecuteRequestDto } from '@app/http-contracts';

/** The configured limits of an execute request. */
export interface RequestLimits {
  maxStatementLength: number;
  maxParams: number;
  maxParamBytes: number;
}

const OPTIONAL_FIELDS = [
  'database',
  'schema',
  'format',
  'params',
  'fetch_size',
  'max_rows',
] as const;
// PostgreSQL's NAMEDATALEN - 1: longer names would be cut short, silently.
const MAX_NAME_BYTES = 63;

/** A name as shown in a message: never more than a few dozen characters of it. */
const shown = (name: string) =>
  JSON.stringify(name.length > 40 ? `${name.slice(0, 40)}…` : name).replace(/\\u0000/g, '\\0');

/**
 * A database or schema name PostgreSQL can take: 1 to 63 bytes, no NUL (which would cut the
 * protocol message it travels in). 400 otherwise.
 */
export function checkName(field: string, name: string): void {
  if (name.includes('\u0000')) {
    throw new SluiceError('INVALID_REQUEST', `${field} must not contain a NUL character`);
  }
  checkUnicode(field, name);
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes === 0 || bytes > MAX_NAME_BYTES) {
    throw new SluiceError('INVALID_REQUEST', `${field} must be 1 to ${MAX_NAME_BYTES} bytes long`);
  }
}

/**
 * Checks what validation cannot: the configured limits (413), and values that would reach
 * PostgreSQL malformed (400): explicit nulls, NUL characters in the statement or in names.
 */
export function enforceRequestLimits(
  request: Readonly<ExecuteRequestDto>,
  limits: RequestLimits,
  database: string | undefined,
): void {
  for (const field of OPTIONAL_FIELDS) {
    if ((request as Record<string, unknown>)[field] === null) {
      throw new SluiceError('INVALID_REQUEST', `${field} must not be null; leave it out instead`);
    }
  }
  const { statement } = request;
  if (statement.length > limits.maxStatementLength) {
    throw new SluiceError(
      'LIMIT_EXCEEDED',
      `statement is ${statement.length} characters long; the limit is ${limits.maxStatementLength}`,
    );
  }
  if (statement.includes('\u0000')) {
    throw new SluiceError('INVALID_REQUEST', 'statement must not contain a NUL character');
  }
  checkUnicode('statement', statement);
  if (database !== undefined) checkName('database', database);
  if (request.schema !== undefined) checkName('schema', request.schema);
  const params = request.params ?? {};
  const names = Object.keys(params);
  if (names.length > limits.maxParams) {
    throw new SluiceError(
      'LIMIT_EXCEEDED',
      `params has ${names.length} entries; the limit is ${limits.maxParams}`,
    );
  }
  for (const name of names) {
    if (hasLoneSurrogate(params[name])) throw notUnicode(`parameter ${shown(name)}`);
    const bytes = paramBytes(params[name]);
    if (bytes > limits.maxParamBytes) {
      throw new SluiceError(
        'LIMIT_EXCEEDED',
        `parameter ${shown(name)} is ${bytes} bytes; the limit is ${limits.maxParamBytes}`,
      );
    }
  }
}

// A surrogate half without its partner: JSON allows it (`"\ud800"`), UTF-8 cannot carry it.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

const notUnicode = (field: string) =>
  new SluiceError('INVALID_REQUEST', `${field} is not valid Unicode (a lone surrogate)`);

/** Text PostgreSQL would receive altered (U+FFFD in place of a lone surrogate) is refused. */
function checkUnicode(field: string, text: string): void {
  if (LONE_SURROGATE.test(text)) throw notUnicode(field);
}

/** Whether a value holds a lone surrogate in a string, anywhere in it (an array's, an object's). */
function hasLoneSurrogate(value: unknown): boolean {
  if (typeof value === 'string') return LONE_SURROGATE.test(value);
  if (Array.isArray(value)) return value.some(hasLoneSurrogate);
  if (typeof value === 'object' && value !== null) {
    return Object.entries(value).some(([k, v]) => LONE_SURROGATE.test(k) || hasLoneSurrogate(v));
  }
  return false;
}

/** Size of a value as sent: a string's own bytes, anything else as JSON text. */
function paramBytes(value: unknown): number {
  if (typeof value === 'string') return Buffer.byteLength(value, 'utf8');
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    // Left for the binder to refuse.
    return 0;
  }
  return text === undefined ? 0 : Buffer.byteLength(text, 'utf8');
}
