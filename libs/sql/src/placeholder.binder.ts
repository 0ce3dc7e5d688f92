import { builtins, type builtinsTypes } from 'pg-types';

// PostgreSQL's built-in type OIDs, as plain numbers (pg-types types them as an enum).
const OID: Readonly<Record<builtinsTypes, number>> = builtins;

/** A statement ready for the extended query protocol: no value is ever part of `text`. */
export interface BoundStatement {
  /** SQL text with each placeholder replaced by $1..$n */
  text: string;
  /** text-format values for the bind message, null for SQL NULL */
  values: (string | null)[];
  /** parameter type OIDs for the Parse message (0 = unknown, let PostgreSQL infer) */
  types: number[];
  /** parameter names in $n order */
  names: string[];
}

/** A bare `{name}` placeholder has no value (absent or `undefined`) in `params`. */
export class MissingParameterError extends Error {
  readonly code = 'MISSING_PARAMETER';

  constructor(readonly parameter: string) {
    super(`no value for parameter {${parameter}}`);
    this.name = 'MissingParameterError';
  }
}

/** A parameter value that cannot be sent to PostgreSQL (non-finite number, ragged array, ...). */
export class InvalidParameterError extends Error {
  readonly code = 'INVALID_PARAMETER';

  constructor(
    readonly parameter: string,
    reason: string,
  ) {
    super(`invalid value for parameter {${parameter}}: ${reason}`);
    this.name = 'InvalidParameterError';
  }
}

const OID_UNKNOWN = 0;

const INT4_MIN = -2147483648;
const INT4_MAX = 2147483647;
const INT8_MIN = -(2n ** 63n);
const INT8_MAX = 2n ** 63n - 1n;
// PostgreSQL's MAXDIM: deeper array literals are rejected by the server anyway.
const MAX_ARRAY_DIMS = 6;

const TAB = 9;
const LF = 10;
const VT = 11;
const FF = 12;
const CR = 13;
const SPACE = 32;
const DQUOTE = 34;
const DOLLAR = 36;
const AMP = 38;
const QUOTE = 39;
const STAR = 42;
const DASH = 45;
const SLASH = 47;
const BACKSLASH = 92;
const LBRACE = 123;
const RBRACE = 125;

interface Encoded {
  value: string | null;
  type: number;
}

/**
 * Replaces `{name}` placeholders (and string literals that are exactly `'{name}'` with `name` in
 * `params`) by `$n` bind parameters, typed from their JSON values. One linear pass that follows
 * PostgreSQL's lexer: nothing inside literals, quoted identifiers, dollar quotes or comments is
 * touched. Throws MissingParameterError or InvalidParameterError.
 */
export function bindPlaceholders(
  statement: string,
  params: Record<string, unknown> = {},
): BoundStatement {
  // Both placeholder forms need a brace: skip the scan for the common case.
  if (!statement.includes('{')) return { text: statement, values: [], types: [], names: [] };

  const sql = statement;
  const len = sql.length;
  const out: string[] = [];
  const values: (string | null)[] = [];
  const types: number[] = [];
  const names: string[] = [];
  const slots = new Map<string, number>();
  const encodings = new Map<string, Encoded>();
  let copied = 0;
  let positional: string | undefined;

  const valueOf = (name: string): unknown =>
    Object.hasOwn(params, name) ? params[name] : undefined;

  const encodingOf = (name: string, value: unknown): Encoded => {
    let encoded = encodings.get(name);
    if (!encoded) {
      encoded = encodeValue(name, value);
      encodings.set(name, encoded);
    }
    return encoded;
  };

  // Replaces sql[start, end) by the $n of (name, type); bare and quoted uses of one name share a
  // slot unless they are typed differently.
  const bind = (start: number, end: number, name: string, encoded: Encoded, type: number): void => {
    const key = `${type}:${name}`;
    let n = slots.get(key);
    if (n === undefined) {
      values.push(encoded.value);
      types.push(type);
      names.push(name);
      n = values.length;
      slots.set(key, n);
    }
    let ref = `$${n}`;
    // Keep $n a token of its own: `a$1` is an identifier and `$1` + `2` would read as `$12`.
    if (start > 0 && isIdentCont(sql.charCodeAt(start - 1))) ref = ` ${ref}`;
    if (end < len && isIdentCont(sql.charCodeAt(end))) ref = `${ref} `;
    out.push(sql.slice(copied, start), ref);
    copied = end;
  };

  // Index just past `[A-Za-z_][A-Za-z0-9_]*` at from, or -1.
  const nameEnd = (from: number): number => {
    if (from >= len || !isNameStart(sql.charCodeAt(from))) return -1;
    let j = from + 1;
    while (j < len && isNameCont(sql.charCodeAt(j))) j++;
    return j;
  };

  // `'a'` + whitespace with a newline + `'b'` is one literal in PostgreSQL: index of the
  // continuing quote, or -1.
  const continuation = (from: number): number => {
    let j = from;
    let newline = false;
    while (j < len) {
      const c = sql.charCodeAt(j);
      if (c === LF || c === CR) {
        newline = true;
        j++;
      } else if (c === SPACE || c === TAB || c === FF || c === VT) {
        j++;
      } else if (c === DASH && sql.charCodeAt(j + 1) === DASH) {
        j = lineEnd(j + 2);
      } else {
        break;
      }
    }
    return newline && j < len && sql.charCodeAt(j) === QUOTE ? j : -1;
  };

  // from is just past the opening quote; returns the index past the literal (or len).
  const skipString = (
    from: number,
    { backslashEscapes }: { backslashEscapes: boolean },
  ): number => {
    let j = from;
    for (;;) {
      while (j < len) {
        const c = sql.charCodeAt(j);
        if (c === QUOTE) {
          if (sql.charCodeAt(j + 1) !== QUOTE) break;
          j += 2;
        } else if (backslashEscapes && c === BACKSLASH) {
          j += 2;
        } else {
          j++;
        }
      }
      if (j >= len) return len;
      const next = continuation(j + 1);
      if (next < 0) return j + 1;
      j = next + 1;
    }
  };

  const skipQuotedIdentifier = (from: number): number => {
    let j = from;
    while (j < len) {
      if (sql.charCodeAt(j) === DQUOTE) {
        if (sql.charCodeAt(j + 1) !== DQUOTE) return j + 1;
        j += 2;
      } else {
        j++;
      }
    }
    return len;
  };

  const lineEnd = (from: number): number => {
    let j = from;
    while (j < len) {
      const c = sql.charCodeAt(j);
      if (c === LF || c === CR) return j;
      j++;
    }
    return len;
  };

  // Block comments nest in PostgreSQL.
  const skipBlockComment = (from: number): number => {
    let depth = 1;
    let j = from;
    while (j < len) {
      const c = sql.charCodeAt(j);
      if (c === SLASH && sql.charCodeAt(j + 1) === STAR) {
        depth++;
        j += 2;
      } else if (c === STAR && sql.charCodeAt(j + 1) === SLASH) {
        j += 2;
        if (--depth === 0) return j;
      } else {
        j++;
      }
    }
    return len;
  };

  // At a `$` that does not continue an identifier: `$1`, `$tag$...$tag$`, or a lone `$`.
  const skipDollar = (at: number): number => {
    let j = at + 1;
    if (isDigit(sql.charCodeAt(j))) {
      while (j < len && isDigit(sql.charCodeAt(j))) j++;
      positional ??= sql.slice(at, j);
      return j;
    }
    if (j < len && isIdentStart(sql.charCodeAt(j))) {
      j++;
      while (j < len && isTagCont(sql.charCodeAt(j))) j++;
    }
    if (sql.charCodeAt(j) !== DOLLAR) return at + 1;
    const delimiter = sql.slice(at, j + 1);
    const close = sql.indexOf(delimiter, j + 1);
    return close < 0 ? len : close + delimiter.length;
  };

  // At a plain `'`: binds `'{name}'` when name has a value, else skips the literal.
  const plainLiteral = (at: number): number => {
    if (sql.charCodeAt(at + 1) === LBRACE) {
      const end = nameEnd(at + 2);
      if (
        end > 0 &&
        sql.charCodeAt(end) === RBRACE &&
        sql.charCodeAt(end + 1) === QUOTE &&
        sql.charCodeAt(end + 2) !== QUOTE &&
        continuation(end + 2) < 0
      ) {
        const name = sql.slice(at + 2, end);
        const value = valueOf(name);
        if (value !== undefined) {
          // Exactly what text substitution would have put between the quotes, left for
          // PostgreSQL to type like a string literal.
          bind(at, end + 2, name, encodingOf(name, value), OID_UNKNOWN);
          return end + 2;
        }
      }
    }
    return skipString(at + 1, { backslashEscapes: false });
  };

  const placeholder = (at: number): number => {
    const end = nameEnd(at + 1);
    if (end < 0 || sql.charCodeAt(end) !== RBRACE) return at + 1;
    const name = sql.slice(at + 1, end);
    const value = valueOf(name);
    if (value === undefined) throw new MissingParameterError(name);
    const encoded = encodingOf(name, value);
    bind(at, end + 1, name, encoded, encoded.type);
    return end + 1;
  };

  // A one-letter identifier may prefix a string: E'..' (backslash escapes), B'..', X'..',
  // N'..' and U&'..' (standard quoting). None of them is ever bound.
  const prefixedString = (prefix: number, at: number): number => {
    const next = sql.charCodeAt(at);
    const letter = prefix | 0x20;
    if (next === QUOTE) {
      if (letter === 0x65) return skipString(at + 1, { backslashEscapes: true });
      if (letter === 0x62 || letter === 0x78 || letter === 0x6e)
        return skipString(at + 1, { backslashEscapes: false });
    } else if (letter === 0x75 && next === AMP && sql.charCodeAt(at + 1) === QUOTE) {
      return skipString(at + 2, { backslashEscapes: false });
    }
    return at;
  };

  let i = 0;
  while (i < len) {
    const c = sql.charCodeAt(i);
    if (c === QUOTE) {
      i = plainLiteral(i);
    } else if (c === DQUOTE) {
      i = skipQuotedIdentifier(i + 1);
    } else if (c === DASH && sql.charCodeAt(i + 1) === DASH) {
      i = lineEnd(i + 2);
    } else if (c === SLASH && sql.charCodeAt(i + 1) === STAR) {
      i = skipBlockComment(i + 2);
    } else if (c === DOLLAR) {
      i = skipDollar(i);
    } else if (c === LBRACE) {
      i = placeholder(i);
    } else if (isIdentStart(c)) {
      // Whole identifiers, so a `$` inside one (`a$b$`) never opens a dollar quote.
      let j = i + 1;
      while (j < len && isIdentCont(sql.charCodeAt(j))) j++;
      i = j === i + 1 ? prefixedString(c, j) : j;
    } else {
      i++;
    }
  }

  // A user's `$1` would silently alias the first bound placeholder.
  if (positional !== undefined && values.length > 0) {
    throw new InvalidParameterError(
      positional,
      'positional parameters cannot be mixed with {name} placeholders',
    );
  }

  out.push(sql.slice(copied));
  return { text: out.join(''), values, types, names };
}

function encodeValue(name: string, value: unknown): Encoded {
  switch (typeof value) {
    case 'string':
      return { value, type: OID_UNKNOWN };
    case 'boolean':
      return { value: value ? 'true' : 'false', type: OID.BOOL };
    case 'number':
      return { value: numberText(name, value), type: numberType(value) };
    case 'bigint':
      return { value: value.toString(), type: bigintType(value) };
    case 'object':
      if (value === null) return { value: null, type: OID_UNKNOWN };
      if (Array.isArray(value)) return encodeArray(name, value);
      if (isPlainObject(value)) return { value: jsonText(name, value), type: OID.JSONB };
      throw new InvalidParameterError(name, 'only JSON values can be parameters');
    default:
      throw new InvalidParameterError(name, `a ${typeof value} cannot be a parameter`);
  }
}

// Types a number the way PostgreSQL types the same numeric literal.
function numberType(value: number): number {
  if (!Number.isInteger(value)) return OID.NUMERIC;
  if (value >= INT4_MIN && value <= INT4_MAX) return OID.INT4;
  return Number.isSafeInteger(value) ? OID.INT8 : OID.NUMERIC;
}

function bigintType(value: bigint): number {
  if (value >= INT4_MIN && value <= INT4_MAX) return OID.INT4;
  return value >= INT8_MIN && value <= INT8_MAX ? OID.INT8 : OID.NUMERIC;
}

function numberText(name: string, value: number): string {
  if (!Number.isFinite(value)) throw new InvalidParameterError(name, 'not a finite number');
  return String(value);
}

function jsonText(name: string, value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    text = undefined;
  }
  if (text === undefined) throw new InvalidParameterError(name, 'not serializable as JSON');
  return text;
}

function encodeArray(name: string, value: unknown[]): Encoded {
  if (containsObject(value)) return { value: jsonText(name, value), type: OID.JSONB };
  const shape: number[] = [];
  for (let level: unknown = value; Array.isArray(level); level = level[0]) {
    if (shape.length === MAX_ARRAY_DIMS) {
      throw new InvalidParameterError(name, `arrays have at most ${MAX_ARRAY_DIMS} dimensions`);
    }
    shape.push(level.length);
    if (level.length === 0) break;
  }
  checkShape(name, value, shape, 0);
  // PostgreSQL has no zero-length dimension: any empty array is '{}'.
  if (shape.includes(0)) return { value: '{}', type: OID_UNKNOWN };
  return { value: arrayLiteral(name, value), type: OID_UNKNOWN };
}

// Iterative, with a visited set, so deep or cyclic input cannot hang or overflow the stack.
function containsObject(root: unknown[]): boolean {
  const seen = new Set<unknown[]>([root]);
  const stack: unknown[][] = [root];
  for (let next = stack.pop(); next; next = stack.pop()) {
    for (const element of next) {
      if (Array.isArray(element)) {
        if (!seen.has(element)) {
          seen.add(element);
          stack.push(element);
        }
      } else if (typeof element === 'object' && element !== null) {
        return true;
      }
    }
  }
  return false;
}

// Rejects ragged arrays: every array at depth d has shape[d] elements, scalars only at the bottom.
function checkShape(name: string, value: unknown[], shape: number[], depth: number): void {
  if (value.length !== shape[depth]) throw raggedError(name);
  const leaf = depth === shape.length - 1;
  for (const element of value) {
    if (Array.isArray(element) === leaf) throw raggedError(name);
    if (!leaf) checkShape(name, element as unknown[], shape, depth + 1);
  }
}

function raggedError(name: string): InvalidParameterError {
  return new InvalidParameterError(name, 'nested arrays must all have the same length');
}

function arrayLiteral(name: string, value: unknown[]): string {
  const parts = value.map((element) =>
    Array.isArray(element) ? arrayLiteral(name, element) : arrayElement(name, element),
  );
  return `{${parts.join(',')}}`;
}

// Strings are always quoted, so "NULL", "" and strings with delimiters stay strings.
function arrayElement(name: string, element: unknown): string {
  switch (typeof element) {
    case 'string':
      return `"${element.replace(/["\\]/g, '\\$&')}"`;
    case 'number':
      return numberText(name, element);
    case 'boolean':
      return element ? 'true' : 'false';
    case 'bigint':
      return element.toString();
    case 'object':
      if (element === null) return 'NULL';
      break;
    default:
      break;
  }
  throw new InvalidParameterError(name, 'array elements must be JSON values');
}

function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

// PostgreSQL's ident_start: letters, `_` and any non-ASCII character.
function isIdentStart(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c >= 128;
}

function isIdentCont(c: number): boolean {
  return isIdentStart(c) || isDigit(c) || c === DOLLAR;
}

function isTagCont(c: number): boolean {
  return isIdentStart(c) || isDigit(c);
}

function isNameStart(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95;
}

function isNameCont(c: number): boolean {
  return isNameStart(c) || isDigit(c);
}
