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

/** Below this many bytes a loop of 4-byte words copies faster than a native call. */
const NATIVE_COPY_FROM = 128;
const HEX = Buffer.from('0123456789abcdef', 'latin1');
const TRUE = Buffer.from('true', 'latin1');
const FALSE = Buffer.from('false', 'latin1');

/**
 * Bytes with a DataView over the same memory: the writers below copy and check values 4 bytes at
 * a time through the view, where a byte at a time was most of a large JSON result's encoding.
 */
export interface WordBytes {
  readonly bytes: Uint8Array;
  readonly words: DataView;
}

export function wordBytes(bytes: Uint8Array): WordBytes {
  return { bytes, words: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength) };
}

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
  return writeJsonValueWords(form, wordBytes(src), start, end, wordBytes(dst), at);
}

/** writeJsonValue over WordBytes made once, for a caller that writes many values. */
export function writeJsonValueWords(
  form: JsonValueForm,
  src: WordBytes,
  start: number,
  end: number,
  dst: WordBytes,
  at: number,
): number {
  switch (form) {
    case 'verbatim':
      return writeJsonVerbatim(src, start, end, dst, at);
    case 'string':
      return writeJsonString(src, start, end, dst, at);
    case 'number':
      return writeJsonNumber(src, start, end, dst, at);
    case 'bool':
      return writeJsonBool(src, start, end, dst, at);
    case 'date':
      return writeJsonDate(src, start, end, dst, at);
    case 'timestamp':
      return writeJsonTimestamp(src, start, end, dst, at);
    case 'timestamptz':
      return writeJsonTimestamptz(src, start, end, dst, at);
    case 'encoded':
      return -1;
  }
}

/** A form's writer: the JSON of the value `src[start, end)` at `dst[at]`; where it ends, or -1. */
export type JsonFormWriter = (
  src: WordBytes,
  start: number,
  end: number,
  dst: WordBytes,
  at: number,
) => number;

/*
 * Each form's writer, as writeJsonValueWords calls it, for a caller that dispatches on the form
 * itself (the row writer: one call site a form, which V8 can inline, where the switch above is
 * too large to be).
 */

/** `verbatim`: the text is its JSON (integers, json, jsonb). */
export const writeJsonVerbatim: JsonFormWriter = (src, start, end, dst, at) => {
  return copyWords(src, start, end, dst, at);
};

/** `number`: the text as it is when it is a JSON number, else a JSON string (NaN, Infinity). */
export const writeJsonNumber: JsonFormWriter = (src, start, end, dst, at) => {
  // Copied as it is checked: the usual `-ddd.ddd` in one pass, anything else checked again.
  const s = src.bytes;
  const d = dst.bytes;
  const from = at;
  let i = start;
  if (i < end && s[i] === MINUS) d[at++] = s[i++];
  if (i < end) {
    const c = s[i];
    if (c === ZERO) {
      d[at++] = c;
      i++;
    } else if (c > ZERO && c <= NINE) {
      while (i < end && isDigit(s[i])) d[at++] = s[i++];
    } else {
      return writeJsonString(src, start, end, dst, from);
    }
    if (i < end && s[i] === DOT) {
      d[at++] = DOT;
      i++;
      while (i < end && isDigit(s[i])) d[at++] = s[i++];
      if (s[i - 1] === DOT) return writeJsonString(src, start, end, dst, from);
    }
    if (i === end) return at;
  }
  return isJsonNumber(s, start, end)
    ? copyWords(src, start, end, dst, from)
    : writeJsonString(src, start, end, dst, from);
};

/** `bool`: `t` is true, anything else false. */
export const writeJsonBool: JsonFormWriter = (src, start, end, dst, at) => {
  const d = dst.bytes;
  if (end - start === 1 && src.bytes[start] === LOWER_T) {
    d[at] = TRUE[0];
    d[at + 1] = TRUE[1];
    d[at + 2] = TRUE[2];
    d[at + 3] = TRUE[3];
    return at + 4;
  }
  for (let i = 0; i < FALSE.length; i++) d[at++] = FALSE[i];
  return at;
};

/** `date`: quoted when in ISO form, else -1 (the encoder decides). */
export const writeJsonDate: JsonFormWriter = (src, start, end, dst, at) => {
  if (!isIsoDate(src.bytes, start, end)) return -1;
  const d = dst.bytes;
  d[at] = QUOTE;
  at = copyWords(src, start, end, dst, at + 1);
  d[at] = QUOTE;
  return at + 1;
};

/** `timestamp`: quoted in XSD form when in ISO form, else -1 (the encoder decides). */
export const writeJsonTimestamp: JsonFormWriter = (src, start, end, dst, at) => {
  if (!isIsoDate(src.bytes, start, end)) return -1;
  return writeTimestamp('timestamp', src, start, end, dst, at);
};

/** `timestamptz`: quoted in XSD form when in ISO form, else -1 (the encoder decides). */
export const writeJsonTimestamptz: JsonFormWriter = (src, start, end, dst, at) => {
  if (!isIsoDate(src.bytes, start, end)) return -1;
  return writeTimestamp('timestamptz', src, start, end, dst, at);
};

/** `string`: as JSON.stringify writes a string, `"` and `\` escaped, control characters too. */
export const writeJsonString: JsonFormWriter = (src, start, end, dst, at) => {
  const s = src.bytes;
  const d = dst.bytes;
  const sw = src.words;
  const dw = dst.words;
  d[at++] = QUOTE;
  let i = start;
  while (i < end) {
    if (i + 4 <= end) {
      const word = sw.getInt32(i, true);
      if (!needsEscape(word)) {
        dw.setInt32(at, word, true);
        i += 4;
        at += 4;
        continue;
      }
    }
    const c = s[i++];
    if (c >= SPACE && c !== QUOTE && c !== BACKSLASH) {
      d[at++] = c;
      continue;
    }
    d[at++] = BACKSLASH;
    switch (c) {
      case QUOTE:
      case BACKSLASH:
        d[at++] = c;
        break;
      case 0x08:
        d[at++] = 0x62; // b
        break;
      case 0x09:
        d[at++] = 0x74; // t
        break;
      case 0x0a:
        d[at++] = 0x6e; // n
        break;
      case 0x0c:
        d[at++] = 0x66; // f
        break;
      case 0x0d:
        d[at++] = 0x72; // r
        break;
      default:
        d[at++] = 0x75; // u
        d[at++] = ZERO;
        d[at++] = ZERO;
        d[at++] = HEX[c >> 4];
        d[at++] = HEX[c & 15];
    }
  }
  d[at++] = QUOTE;
  return at;
};

/**
 * Whether one of the four bytes of `word` is below 0x20, a `"` or a `\`, all four tested at once
 * ("Determine if a word has a byte less than n" and "… equal to n", Bit Twiddling Hacks): a byte
 * b < n (n <= 128) sets its high bit in (word - n·0x01010101) & ~word, and a borrow never sets
 * one where no byte is below n.
 */
function needsEscape(word: number): boolean {
  const quote = word ^ 0x22222222;
  const backslash = word ^ 0x5c5c5c5c;
  return (
    ((((word - 0x20202020) & ~word) |
      ((quote - 0x01010101) & ~quote) |
      ((backslash - 0x01010101) & ~backslash)) &
      0x80808080) !==
    0
  );
}

/** Copies `src[start, end)` to `dst[at]`, 4 bytes at a time, or natively when long. */
function copyWords(src: WordBytes, start: number, end: number, dst: WordBytes, at: number): number {
  const s = src.bytes;
  const d = dst.bytes;
  if (end - start >= NATIVE_COPY_FROM) {
    d.set(s.subarray(start, end), at);
    return at + end - start;
  }
  const sw = src.words;
  const dw = dst.words;
  let i = start;
  for (; i + 4 <= end; i += 4, at += 4) dw.setInt32(at, sw.getInt32(i, true), true);
  while (i < end) d[at++] = s[i++];
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

/** `src[start, end)` starts `YYYY-MM-DD ` (a year of four digits, the commonest): its first space at 10. */
function isFourDigitYearDay(src: Uint8Array, start: number, end: number): boolean {
  return (
    start + 10 < end &&
    src[start + 10] === SPACE &&
    isDigit(src[start]) &&
    isDigit(src[start + 1]) &&
    isDigit(src[start + 2]) &&
    isDigit(src[start + 3]) &&
    src[start + 4] === MINUS &&
    isDigit(src[start + 5]) &&
    isDigit(src[start + 6]) &&
    src[start + 7] === MINUS &&
    isDigit(src[start + 8]) &&
    isDigit(src[start + 9])
  );
}

/** The XSD form: 'T' for the first space, and for timestamptz an offset's minutes always. */
function writeTimestamp(
  form: 'timestamp' | 'timestamptz',
  src: WordBytes,
  start: number,
  end: number,
  dst: WordBytes,
  at: number,
): number {
  const s = src.bytes;
  const d = dst.bytes;
  let sp = isFourDigitYearDay(s, start, end) ? start + 10 : start;
  while (sp < end && s[sp] !== SPACE) sp++;
  d[at++] = QUOTE;
  if (sp === end) {
    at = copyWords(src, start, end, dst, at);
    d[at] = QUOTE;
    return at + 1;
  }
  at = copyWords(src, start, sp, dst, at);
  d[at++] = T;
  if (form === 'timestamp') {
    at = copyWords(src, sp + 1, end, dst, at);
    d[at] = QUOTE;
    return at + 1;
  }
  const bc = end - start >= 3 && s[end - 3] === SPACE && s[end - 2] === B && s[end - 1] === C;
  const timeEnd = bc ? end - 3 : end;
  const c = timeEnd - 3 >= start ? s[timeEnd - 3] : -1;
  at = copyWords(src, sp + 1, timeEnd, dst, at);
  if (c === PLUS || c === MINUS) {
    d[at++] = COLON;
    d[at++] = ZERO;
    d[at++] = ZERO;
  }
  if (bc) {
    d[at++] = SPACE;
    d[at++] = B;
    d[at++] = C;
  }
  d[at] = QUOTE;
  return at + 1;
}
