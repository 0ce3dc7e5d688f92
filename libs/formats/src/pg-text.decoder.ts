/**
 * PostgreSQL's text output → typed values, for the columnar encoders (Parquet, Arrow). Pure and
 * allocation-light. Assumes the session settings every statement runs with: DateStyle ISO,
 * IntervalStyle postgres, TimeZone UTC (a timestamptz offset other than +00 is still honoured).
 *
 * `infinity` / `-infinity` dates and timestamps map to the largest / smallest value minus one:
 * ±(2^31 − 1) days and ±(2^63 − 1) µs — the values DuckDB reads back as ±infinity — rather than
 * to NULL, so that they stay distinct from a missing value.
 */

import { SluiceError } from '@app/contracts';
import { isoYearEnd } from '@app/sql';
import { builtins, type builtinsTypes } from 'pg-types';
import { parse as parseArrayText } from 'postgres-array';
import decodeByteaText from 'postgres-bytea';

// PostgreSQL's built-in type OIDs, as plain numbers (pg-types types them as an enum).
const OID: Readonly<Record<builtinsTypes, number>> = builtins;

/** What a column's values become in the columnar formats. */
export type PgValueKind =
  | 'int16'
  | 'int32'
  | 'int64'
  | 'float32'
  | 'float64'
  | 'bool'
  | 'text'
  | 'json'
  | 'date'
  | 'time'
  | 'timestamp'
  | 'timestamptz'
  | 'uuid'
  | 'bytea';

/** A column's value kind; `list` for arrays, whose elements have `kind`. */
export interface PgColumnKind {
  kind: PgValueKind;
  list: boolean;
  /** For a `json` column whose text is not JSON yet (a composite, hstore): makes it JSON. */
  toJson?: (text: string) => string;
}

// `name` is left out of pg-types' builtins (it has a typelem, for subscripting).
const NAME_OID = 19;
// box[], whose elements are separated by ';' (box's typdelim).
const BOX_ARRAY_OID = 1020;

export const DATE_INFINITY = 2147483647;
export const DATE_MINUS_INFINITY = -2147483647;
export const TIMESTAMP_INFINITY = 9223372036854775807n;
export const TIMESTAMP_MINUS_INFINITY = -9223372036854775807n;

const SCALAR_KINDS: ReadonlyMap<number, PgValueKind> = new Map<number, PgValueKind>([
  [OID.INT2, 'int16'],
  [OID.INT4, 'int32'],
  [OID.INT8, 'int64'],
  [OID.FLOAT4, 'float32'],
  [OID.FLOAT8, 'float64'],
  [OID.BOOL, 'bool'],
  [OID.JSON, 'json'],
  [OID.JSONB, 'json'],
  [OID.DATE, 'date'],
  [OID.TIME, 'time'],
  [OID.TIMESTAMP, 'timestamp'],
  [OID.TIMESTAMPTZ, 'timestamptz'],
  [OID.UUID, 'uuid'],
  [OID.BYTEA, 'bytea'],
]);

/**
 * Array type OID → element type OID, for the common built-in types. pg-types names only the
 * element types; the array types' OIDs are as fixed (pg_type.dat) but have no names there.
 */
const ARRAY_ELEMENTS: ReadonlyMap<number, number> = new Map<number, number>([
  [1005, OID.INT2],
  [1007, OID.INT4],
  [1016, OID.INT8],
  [1021, OID.FLOAT4],
  [1022, OID.FLOAT8],
  [1231, OID.NUMERIC],
  [1000, OID.BOOL],
  [1009, OID.TEXT],
  [1015, OID.VARCHAR],
  [1014, OID.BPCHAR],
  [1002, OID.CHAR],
  [1003, NAME_OID],
  [1182, OID.DATE],
  [1183, OID.TIME],
  [1115, OID.TIMESTAMP],
  [1185, OID.TIMESTAMPTZ],
  [1187, OID.INTERVAL],
  [2951, OID.UUID],
  [199, OID.JSON],
  [3807, OID.JSONB],
  [1001, OID.BYTEA],
  [1028, OID.OID],
]);

/**
 * The value kind of a column: anything not listed (numeric, interval, enums…) is text, except
 * values that to_json() makes objects of (`objectJson`: composites, hstore), which are JSON as
 * json and jsonb are — PostgreSQL's text form of them is no format a reader knows.
 */
export function pgColumnKind(
  oid: number,
  typeName: string,
  objectJson?: { list: boolean; element: (text: string) => string },
): PgColumnKind {
  if (objectJson) return { kind: 'json', list: objectJson.list, toJson: objectJson.element };
  const element = ARRAY_ELEMENTS.get(oid);
  if (element !== undefined) return { kind: SCALAR_KINDS.get(element) ?? 'text', list: true };
  if (typeName.endsWith('[]')) return { kind: 'text', list: true };
  return { kind: SCALAR_KINDS.get(oid) ?? 'text', list: false };
}

/** The element delimiter of an array type's text form (`;` for box, `,` for all others). */
export function pgArrayDelimiter(oid: number): string {
  return oid === BOX_ARRAY_OID ? ';' : ',';
}

/** int2 / int4. */
export function decodeInt(text: string): number {
  return Number(text);
}

/** int8. */
export function decodeBigint(text: string): bigint {
  return BigInt(text);
}

/** int8 as a number when it is exact (up to 15 digits), else as a bigint: no bigint per value. */
export function decodeInt64(text: string): number | bigint {
  return text.length <= 15 ? Number(text) : BigInt(text);
}

/** float4 / float8, including NaN, Infinity and -Infinity. */
export function decodeFloat(text: string): number {
  return Number(text);
}

export function decodeBool(text: string): boolean {
  return text === 't';
}

/** Days from 1970-01-01 of a proleptic Gregorian date (year 0 = 1 BC). */
export function daysFromCivil(year: number, month: number, day: number): number {
  // Howard Hinnant's days_from_civil
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

function digit(text: string, at: number): number {
  return text.charCodeAt(at) - 48;
}

function two(text: string, at: number): number {
  return digit(text, at) * 10 + digit(text, at + 1);
}

function isBc(text: string): boolean {
  return text.endsWith(' BC');
}

function isDigitAt(text: string, at: number): boolean {
  const c = text.charCodeAt(at);
  return c >= 48 && c <= 57;
}

/**
 * A date or timestamp whose text is not in DateStyle ISO: a statement can change DateStyle for
 * itself (`set_config('DateStyle', 'German', true)`), and its text (`02.01.2024`, `01-02-2024`)
 * read as ISO would loop for ever looking for a '-' or give another day.
 */
function notIso(kind: string, text: string): SluiceError {
  return new SluiceError(
    'DATA_ERROR',
    `${kind} ${JSON.stringify(text.slice(0, 64))} is not in DateStyle ISO, the only form Parquet ` +
      'and Arrow read: leave DateStyle as it is, or cast the column to text',
    '22007',
  );
}

/** isoYearEnd, the month's and day's digits checked too; throws notIso for any other text. */
function yearEnd(text: string, kind: string): number {
  const y = isoYearEnd(text);
  if (
    y < 0 ||
    !isDigitAt(text, y + 1) ||
    !isDigitAt(text, y + 2) ||
    !isDigitAt(text, y + 4) ||
    !isDigitAt(text, y + 5)
  ) {
    throw notIso(kind, text);
  }
  return y;
}

/** Parses `Y…Y-MM-DD` at 0, the year ending at `y` (see yearEnd), BC when the text ends so. */
function parseDays(text: string, y: number): number {
  let year = 0;
  for (let i = 0; i < y; i++) year = year * 10 + text.charCodeAt(i) - 48;
  if (isBc(text)) year = 1 - year;
  return daysFromCivil(year, two(text, y + 1), two(text, y + 4));
}

/** date → days since 1970-01-01; ±infinity → ±(2^31 − 1). */
export function decodeDate(text: string): number {
  const c = text.charCodeAt(0);
  if (c === 105) return DATE_INFINITY; // 'infinity'
  if (c === 45) return DATE_MINUS_INFINITY; // '-infinity'
  return parseDays(text, yearEnd(text, 'date'));
}

// Largest |seconds| whose microseconds (plus a fraction) are still an exact double.
const SAFE_SECONDS = 9_007_199_253;

/** Where a fraction `.f…` at `at` ends; `at` itself when there is none. */
function fractionEnd(text: string, at: number): number {
  if (text.charCodeAt(at) !== 46) return at;
  let i = at + 1;
  let c = text.charCodeAt(i);
  while (c >= 48 && c <= 57) c = text.charCodeAt(++i);
  return i;
}

/** The fraction `.f…` from `at` to `end` (see fractionEnd; up to 6 digits) in µs. */
function parseFraction(text: string, at: number, end: number): number {
  let micros = 0;
  let scale = 100000;
  for (let i = at + 1; i < end; i++) {
    micros += (text.charCodeAt(i) - 48) * scale;
    scale /= 10;
  }
  return Math.round(micros);
}

/**
 * Microseconds since 1970 as an int64 end before PostgreSQL's timestamps do (294276 AD): the last
 * 29 years fit no Parquet or Arrow TIMESTAMP(MICROS), and ±(2^63 − 1) already mean ±infinity.
 */
function outOfRange(text: string): SluiceError {
  return new SluiceError(
    'DATA_ERROR',
    `timestamp ${text} is out of range for Parquet and Arrow (int64 microseconds since 1970 ` +
      'reach 294247-01-10 04:00:54.775806 at most); cast it to text or ask for JSON or CSV',
    '22008',
  );
}

function micros(seconds: number, fraction: number): number | bigint {
  if (seconds <= SAFE_SECONDS && seconds >= -SAFE_SECONDS) return seconds * 1_000_000 + fraction;
  return BigInt(seconds) * 1_000_000n + BigInt(fraction);
}

/**
 * timestamp / timestamptz → µs since 1970-01-01 00:00 (UTC for timestamptz: the printed offset,
 * e.g. `+05:30` or `-00:53:28`, is taken off; a timestamp is taken as it reads). A number while
 * exact (years 1685–2255), else a bigint; ±infinity → ±(2^63 − 1).
 */
export function decodeTimestampMicros(text: string): number | bigint {
  const c = text.charCodeAt(0);
  if (c === 105) return TIMESTAMP_INFINITY;
  if (c === 45) return TIMESTAMP_MINUS_INFINITY;
  const y = yearEnd(text, 'timestamp');
  const days = parseDays(text, y);
  const t = y + 7; // 'HH:MM:SS' starts after '-MM-DD '
  if (
    text.charCodeAt(t - 1) !== 32 ||
    text.charCodeAt(t + 2) !== 58 ||
    text.charCodeAt(t + 5) !== 58 ||
    !isDigitAt(text, t + 7)
  ) {
    throw notIso('timestamp', text);
  }
  let seconds = days * 86400 + two(text, t) * 3600 + two(text, t + 3) * 60 + two(text, t + 6);
  const zone = fractionEnd(text, t + 8);
  const fraction = parseFraction(text, t + 8, zone);
  const sign = text.charCodeAt(zone);
  if (sign === 43 || sign === 45) {
    let i = zone + 1;
    let offset = two(text, i) * 3600;
    if (text.charCodeAt(i + 2) === 58) {
      offset += two(text, i + 3) * 60;
      i += 3;
      if (text.charCodeAt(i + 2) === 58) offset += two(text, i + 3);
    }
    seconds += sign === 43 ? -offset : offset;
  }
  return micros(seconds, fraction);
}

/**
 * decodeTimestampMicros for an int64 column (Parquet's and Arrow's TIMESTAMP(MICROS)): the same
 * value, or a 22008 error for the years after 294247 that no int64 holds.
 */
export function decodeTimestampInt64(text: string): number | bigint {
  const v = decodeTimestampMicros(text);
  if (typeof v === 'number' || text === 'infinity' || text === '-infinity') return v;
  // Written as it is, it would wrap round silently (or read back as infinity).
  if (v >= TIMESTAMP_INFINITY || v <= TIMESTAMP_MINUS_INFINITY) throw outOfRange(text);
  return v;
}

/** timestamp / timestamptz → µs since the epoch as a bigint (see decodeTimestampMicros). */
export function decodeTimestamp(text: string): bigint {
  return BigInt(decodeTimestampMicros(text));
}

/** time → µs since midnight ('24:00:00' is 86 400 000 000). */
export function decodeTime(text: string): number {
  const seconds = two(text, 0) * 3600 + two(text, 3) * 60 + two(text, 6);
  // A time's text ends with its fraction, if it has one.
  return seconds * 1_000_000 + parseFraction(text, 8, text.length);
}

function hex(c: number): number {
  return c <= 57 ? c - 48 : (c | 32) - 87;
}

/** uuid → its 16 bytes, written into `out` at `at` (a new array when out is not given). */
export function decodeUuid(text: string, out: Uint8Array = new Uint8Array(16), at = 0): Uint8Array {
  let j = at;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 45) continue; // '-'
    out[j++] = (hex(c) << 4) | hex(text.charCodeAt(++i));
  }
  return out;
}

/** bytea in hex (`\x…`, the default bytea_output) or escape format → bytes. */
export const decodeBytea: (text: string) => Buffer = decodeByteaText;

type RawWrite = (this: Buffer, text: string, offset: number) => number;
// Buffer#utf8Write and #hexWrite skip write()'s argument parsing: a quarter of the time it takes
// to encode a text column.
const proto = Buffer.prototype as unknown as Record<string, RawWrite | undefined>;
const utf8Write: RawWrite =
  proto.utf8Write ??
  function (this: Buffer, text: string, offset: number) {
    return this.write(text, offset, 'utf8');
  };
const hexWrite: RawWrite =
  proto.hexWrite ??
  function (this: Buffer, text: string, offset: number) {
    return this.write(text, offset, 'hex');
  };

/** Bytes that surely hold `text` in UTF-8: exact for long strings, 3 per UTF-16 unit for short. */
export function utf8Room(text: string): number {
  return text.length < 4096 ? text.length * 3 : Buffer.byteLength(text, 'utf8');
}

/** Writes text as UTF-8 at `at` (room for utf8Room(text) bytes must be there); the byte count. */
export function writeUtf8(buf: Buffer, text: string, at: number): number {
  return utf8Write.call(buf, text, at);
}

/**
 * Writes a bytea's bytes at `at` (room for text.length bytes must be there); the byte count. Hex,
 * the default, goes straight into `buf`: no Buffer per value (bench/PG-TEXT.md: twice as fast).
 */
export function writeBytea(buf: Buffer, text: string, at: number): number {
  return text.charCodeAt(0) === 92 && text.charCodeAt(1) === 120
    ? hexWrite.call(buf, text.substring(2), at)
    : decodeBytea(text).copy(buf, at);
}

/** An array's text form, parsed: nested for more than one dimension; NULL elements are null. */
export type PgArray = (string | null | PgArray)[];

// box's text holds commas, so box[] alone among the built-in arrays separates its elements by
// ';', which postgres-array does not read. Box text has no quotes, braces, ';', spaces or
// backslashes, so each element can be quoted as it stands and the delimiter made ','.
const BOX_ELEMENT = /[^{};]+/g;

function commaDelimitedBoxes(text: string): string {
  const body = text.charCodeAt(0) === 91 ? text.slice(text.indexOf('=') + 1) : text; // '[lo:hi]='
  return body.replace(BOX_ELEMENT, (e) => (e === 'NULL' ? e : '"' + e + '"')).replaceAll(';', ',');
}

/**
 * Parses an array literal as PostgreSQL prints it (postgres-array): `{1,2,NULL}`,
 * `{"a,b","c\"d"}`, `{{1,2},{3,4}}`, `[0:1]={7,8}` (bounds are dropped). Elements stay text.
 * `delimiter` is pgArrayDelimiter's: ',' or, for box[], ';'.
 */
export function parseArray(text: string, delimiter = ','): PgArray {
  // Typed string[] by the library, it returns nested lists for more dimensions, null for NULL.
  return parseArrayText(delimiter === ';' ? commaDelimitedBoxes(text) : text);
}

/** The elements of a (possibly multi-dimensional) array in row-major order. */
export function flattenArray(array: PgArray): (string | null)[] {
  for (const e of array) {
    if (Array.isArray(e)) return array.flat(Infinity as 1) as (string | null)[];
  }
  return array as (string | null)[];
}
