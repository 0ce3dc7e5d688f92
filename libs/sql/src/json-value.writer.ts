import type { JsonValueForm } from './json-value.encoder';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const SPACE = 0x20;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
const T = 0x54;
const B = 0x42;
const C = 0x43;
const COLON = 0x3a;
const LOWER_E = 0x65;
const UPPER_E = 0x45;
const LOWER_T = 0x74;

/** Below this many bytes a loop copies faster than a native call. */
const NATIVE_COPY_FROM = 64;
const HEX = Buffer.from('0123456789abcdef', 'latin1');
const TRUE = Buffer.from('true', 'latin1');
const FALSE = Buffer.from('false', 'latin1');

/** The most bytes writeJsonValue writes for a value of `bytes` bytes (`\u001f` for one). */
export function jsonValueRoom(bytes: number): number {
  return 6 * bytes + 8;
}

/**
 * Writes at `dst[at]` the JSON of the value whose text is the well-formed UTF-8 `src[start, end)`,
 * for a type of form `form` (jsonValueForm), byte for byte what its jsonValueEncoder function
 * gives; `dst` must have room for jsonValueRoom(end - start) bytes. Returns where the JSON ends,
 * or -1 when the bytes alone do not settle it (`encoded`, a date that is not in ISO form): the
 * caller then uses the encoder function, which also refuses what must be refused.
 */
export function writeJsonValue(
  form: JsonValueForm,
  src: Uint8Array,
  start: number,
  end: number,
  dst: Uint8Array,
  at: number,
): number {
  switch (form) {
    case 'verbatim':
      return copyBytes(src, start, end, dst, at);
    case 'string':
      return writeJsonString(src, start, end, dst, at);
    case 'number':
      return isJsonNumber(src, start, end)
        ? copyBytes(src, start, end, dst, at)
        : writeJsonString(src, start, end, dst, at);
    case 'bool': {
      const word = end - start === 1 && src[start] === LOWER_T ? TRUE : FALSE;
      return copyBytes(word, 0, word.length, dst, at);
    }
    case 'date':
      if (!isIsoDate(src, start, end)) return -1;
      dst[at] = QUOTE;
      at = copyBytes(src, start, end, dst, at + 1);
      dst[at] = QUOTE;
      return at + 1;
    case 'timestamp':
    case 'timestamptz':
      return isIsoDate(src, start, end) ? writeTimestamp(form, src, start, end, dst, at) : -1;
    case 'encoded':
      return -1;
  }
}

function copyBytes(src: Uint8Array, start: number, end: number, dst: Uint8Array, at: number) {
  if (end - start >= NATIVE_COPY_FROM) {
    dst.set(src.subarray(start, end), at);
    return at + end - start;
  }
  for (let i = start; i < end; i++) dst[at++] = src[i];
  return at;
}

/** As JSON.stringify writes a string: `"` and `\` escaped, control characters too. */
function writeJsonString(
  src: Uint8Array,
  start: number,
  end: number,
  dst: Uint8Array,
  at: number,
): number {
  dst[at++] = QUOTE;
  for (let i = start; i < end; i++) {
    const c = src[i];
    if (c >= SPACE && c !== QUOTE && c !== BACKSLASH) {
      dst[at++] = c;
      continue;
    }
    dst[at++] = BACKSLASH;
    switch (c) {
      case QUOTE:
      case BACKSLASH:
        dst[at++] = c;
        break;
      case 0x08:
        dst[at++] = 0x62; // b
        break;
      case 0x09:
        dst[at++] = 0x74; // t
        break;
      case 0x0a:
        dst[at++] = 0x6e; // n
        break;
      case 0x0c:
        dst[at++] = 0x66; // f
        break;
      case 0x0d:
        dst[at++] = 0x72; // r
        break;
      default:
        dst[at++] = 0x75; // u
        dst[at++] = ZERO;
        dst[at++] = ZERO;
        dst[at++] = HEX[c >> 4];
        dst[at++] = HEX[c & 15];
    }
  }
  dst[at++] = QUOTE;
  return at;
}

const isDigit = (c: number): boolean => c >= ZERO && c <= NINE;

/** PostgreSQL's IsValidJsonNumber, as json-value.encoder's JSON_NUMBER. */
function isJsonNumber(src: Uint8Array, start: number, end: number): boolean {
  let i = start;
  if (src[i] === MINUS) i++;
  if (i >= end) return false;
  if (src[i] === ZERO) i++;
  else if (isDigit(src[i])) while (i < end && isDigit(src[i])) i++;
  else return false;
  if (i < end && src[i] === DOT) {
    if (!(++i < end && isDigit(src[i]))) return false;
    while (i < end && isDigit(src[i])) i++;
  }
  if (i < end && (src[i] === LOWER_E || src[i] === UPPER_E)) {
    i++;
    if (i < end && (src[i] === PLUS || src[i] === MINUS)) i++;
    if (!(i < end && isDigit(src[i]))) return false;
    while (i < end && isDigit(src[i])) i++;
  }
  return i === end;
}

/** isoYearEnd(text) >= 0: DateStyle ISO's `Y…Y-MM-DD…` (infinity is left to the encoder). */
function isIsoDate(src: Uint8Array, start: number, end: number): boolean {
  let y = start;
  while (y < end && isDigit(src[y])) y++;
  return y - start >= 4 && y + 3 < end && src[y] === MINUS && src[y + 3] === MINUS;
}

/** The XSD form: 'T' for the first space, and for timestamptz an offset's minutes always. */
function writeTimestamp(
  form: 'timestamp' | 'timestamptz',
  src: Uint8Array,
  start: number,
  end: number,
  dst: Uint8Array,
  at: number,
): number {
  let sp = start;
  while (sp < end && src[sp] !== SPACE) sp++;
  dst[at++] = QUOTE;
  if (sp === end) {
    at = copyBytes(src, start, end, dst, at);
    dst[at] = QUOTE;
    return at + 1;
  }
  at = copyBytes(src, start, sp, dst, at);
  dst[at++] = T;
  if (form === 'timestamp') {
    at = copyBytes(src, sp + 1, end, dst, at);
    dst[at] = QUOTE;
    return at + 1;
  }
  const bc = end - start >= 3 && src[end - 3] === SPACE && src[end - 2] === B && src[end - 1] === C;
  const timeEnd = bc ? end - 3 : end;
  const c = timeEnd - 3 >= start ? src[timeEnd - 3] : -1;
  at = copyBytes(src, sp + 1, timeEnd, dst, at);
  if (c === PLUS || c === MINUS) {
    dst[at++] = COLON;
    dst[at++] = ZERO;
    dst[at++] = ZERO;
  }
  if (bc) {
    dst[at++] = SPACE;
    dst[at++] = B;
    dst[at++] = C;
  }
  dst[at] = QUOTE;
  return at + 1;
}
