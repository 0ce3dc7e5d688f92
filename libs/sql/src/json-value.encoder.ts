import { SluiceError } from '@app/contracts';
import { builtins, type builtinsTypes } from 'pg-types';
import { isoYearEnd } from './iso-date.check';
import type { PgTypeInfo } from './type.info';

// PostgreSQL's built-in type OIDs, as plain numbers (pg-types types them as an enum).
const OID: Readonly<Record<builtinsTypes, number>> = builtins;

/** Turns one non-null text value into JSON text equal to PostgreSQL's to_json(). */
export type JsonValueEncoder = (text: string) => string;

// json.c's json_categorize_type also switches on these two pseudo-types, which pg-types'
// builtins (base types only) leave out.
const ANYARRAY_OID = 2277;
const ANYCOMPATIBLEARRAY_OID = 5078;

// Domains over domains are legal; the cap only guards against a corrupt lookup looping.
const MAX_DOMAIN_DEPTH = 32;
// PostgreSQL refuses a composite that contains itself; the cap guards against a corrupt lookup.
const MAX_NESTING = 32;

const LPAREN = 0x28;
const RPAREN = 0x29;
const COMMA = 0x2c;
const SPACE = 0x20;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACKET = 0x5b;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const PLUS = 0x2b;
const MINUS = 0x2d;

// Same grammar as PostgreSQL's IsValidJsonNumber (json_lex_number plus the length check).
const JSON_NUMBER = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;

const encodeString: JsonValueEncoder = (text) => JSON.stringify(text);

// int2/int4/int8 output is always a plain optionally-signed digit string.
const encodeRaw: JsonValueEncoder = (text) => text;

// float and numeric: NaN, Infinity and -Infinity are not JSON numbers and become strings.
const encodeNumber: JsonValueEncoder = (text) =>
  JSON_NUMBER.test(text) ? text : JSON.stringify(text);

const encodeBool: JsonValueEncoder = (text) => (text === 't' ? 'true' : 'false');

/**
 * Refuses a date or timestamp not in DateStyle ISO (`Y…Y-MM-DD…`, or infinity). A statement can
 * change DateStyle for itself (`set_config('DateStyle', 'German', true)`); to_json() prints ISO
 * whatever DateStyle says, and `28.11.2026` would be passed off as its output.
 */
function requireIso(text: string, kind: string): void {
  if (isoYearEnd(text) >= 0 || text === 'infinity' || text === '-infinity') return;
  throw new SluiceError(
    'DATA_ERROR',
    `${kind} ${JSON.stringify(text.slice(0, 64))} is not in DateStyle ISO, the only form JSON ` +
      'output is written in: leave DateStyle as it is, or cast the column to text',
    '22007',
  );
}

// ISO and XSD date output are identical ('infinity' and the ' BC' suffix included).
const encodeDate: JsonValueEncoder = (text) => {
  requireIso(text, 'date');
  return '"' + text + '"';
};

// XSD style puts 'T' where ISO puts the first space; ' BC' stays.
const encodeTimestamp: JsonValueEncoder = (text) => {
  requireIso(text, 'timestamp');
  const sp = text.indexOf(' ');
  if (sp < 0) return '"' + text + '"';
  return '"' + text.slice(0, sp) + 'T' + text.slice(sp + 1) + '"';
};

// As timestamp, and XSD always prints the offset's minutes: +00 becomes +00:00.
const encodeTimestampTz: JsonValueEncoder = (text) => {
  requireIso(text, 'timestamp');
  const sp = text.indexOf(' ');
  if (sp < 0) return '"' + text + '"';
  const bc = text.endsWith(' BC');
  const end = bc ? text.length - 3 : text.length;
  const c = text.charCodeAt(end - 3);
  const time = text.slice(sp + 1, end);
  return (
    '"' +
    text.slice(0, sp) +
    'T' +
    time +
    (c === PLUS || c === MINUS ? ':00' : '') +
    (bc ? ' BC"' : '"')
  );
};

// Parses PostgreSQL array text (array_out) and encodes each element; NULL becomes null. Kept
// over postgres-array: one pass that builds no lists is 1.3–1.8× faster on integer arrays
// (bench/PG-TEXT.md); json-value.encoder.fuzz.spec.ts holds it to that library's reading.
function encodeArrayText(text: string, element: JsonValueEncoder, delim: number): string {
  const n = text.length;
  if (n === 0) return '[]';
  let i = 0;
  const first = text.charCodeAt(0);
  if (first === LBRACKET) {
    // Lower bounds other than 1 come as '[0:2]={...}'; JSON arrays drop them.
    i = text.indexOf('=') + 1;
  } else if (first !== LBRACE) {
    // int2vector and oidvector print their elements space separated, without braces.
    return encodeVectorText(text, element);
  }
  let out = '';
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === LBRACE) {
      out += '[';
      i++;
    } else if (c === RBRACE) {
      out += ']';
      i++;
    } else if (c === delim) {
      out += ',';
      i++;
    } else if (c === QUOTE) {
      let value = '';
      let start = i + 1;
      let j = start;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === QUOTE) break;
        if (d === BACKSLASH) {
          value += text.slice(start, j);
          start = j + 1;
          j += 2;
        } else {
          j++;
        }
      }
      value += text.slice(start, j);
      out += element(value);
      i = j + 1;
    } else {
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === delim || d === RBRACE) break;
        j++;
      }
      const value = text.slice(i, j);
      // array_out quotes any element spelled NULL in any case, so this is a real NULL.
      out += value === 'NULL' ? 'null' : element(value);
      i = j;
    }
  }
  return out;
}

function encodeVectorText(text: string, element: JsonValueEncoder): string {
  const parts = text.split(' ');
  let out = '[';
  for (let k = 0; k < parts.length; k++) {
    if (k > 0) out += ',';
    out += element(parts[k]);
  }
  return out + ']';
}

/**
 * A composite's text form (record_out: `(1,"a b",,"x ""q"" \\ y")`) as to_json() prints it:
 * `{"name":value,…}` with every field encoded for its own type and an empty field as null. In a
 * field, `""` within quotes is one quote and a backslash keeps the next character (record_in).
 * A value whose field count differs from the type's (the type was altered after its attributes
 * were loaded) stays a JSON string rather than be put under the wrong names.
 */
function compositeEncoder(names: string[], fields: JsonValueEncoder[]): JsonValueEncoder {
  const keys = names.map((name, i) => (i === 0 ? '{' : ',') + JSON.stringify(name) + ':');
  const n = fields.length;
  return (text) => {
    if (text.charCodeAt(0) !== LPAREN) return encodeString(text);
    // '()' is also the text of one NULL field: the type tells which.
    if (n === 0) return text === '()' ? '{}' : encodeString(text);
    let out = '';
    let i = 1;
    let k = 0;
    const end = text.length;
    for (;;) {
      // One field: up to an unquoted ',' or ')'.
      let value = '';
      let from = i;
      let quoted = false;
      let inQuotes = false;
      for (; i < end; i++) {
        const c = text.charCodeAt(i);
        if (c === BACKSLASH) {
          value += text.slice(from, i);
          from = ++i; // keep the escaped character
        } else if (c === QUOTE) {
          value += text.slice(from, i);
          if (inQuotes && text.charCodeAt(i + 1) === QUOTE) {
            from = ++i; // '""' inside quotes is one '"'
          } else {
            inQuotes = !inQuotes;
            quoted = true;
            from = i + 1;
          }
        } else if (!inQuotes && (c === COMMA || c === RPAREN)) {
          break;
        }
      }
      if (i >= end || k >= n) return encodeString(text);
      value += text.slice(from, i);
      out += keys[k];
      out += !quoted && value.length === 0 ? 'null' : fields[k](value);
      k++;
      if (text.charCodeAt(i) === RPAREN) break;
      i++;
    }
    if (k !== n || i !== end - 1) return encodeString(text);
    return out + '}';
  };
}

// Where hstoreToken stopped; saves returning an object per token.
let tokenEnd = 0;

/** Reads the '"…"' token of hstore text that starts at `at` (backslash escapes). */
function hstoreToken(text: string, at: number): string {
  let value = '';
  let from = at + 1;
  let i = from;
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === BACKSLASH) {
      value += text.slice(from, i);
      from = ++i; // keep the escaped character
    } else if (c === QUOTE) {
      break;
    }
  }
  tokenEnd = i + 1;
  return value + text.slice(from, i);
}

/**
 * hstore's text form (`"a"=>"1", "b"=>NULL`) as its cast to json, hstore_to_json(), prints it:
 * `{"a": "1", "b": null}` — every value a string, a space after ':' and ','. Keys come in
 * hstore's own order, which its text form keeps.
 */
const encodeHstore: JsonValueEncoder = (text) => {
  let out = '';
  let i = text.indexOf('"');
  while (i >= 0) {
    const key = hstoreToken(text, i);
    let j = text.indexOf('=>', tokenEnd);
    if (j < 0) return encodeString(text);
    for (j += 2; text.charCodeAt(j) === SPACE; j++);
    out += (out.length === 0 ? '{' : ', ') + JSON.stringify(key) + ': ';
    if (text.charCodeAt(j) === QUOTE) {
      out += JSON.stringify(hstoreToken(text, j));
      j = tokenEnd;
    } else {
      out += 'null'; // NULL, the only unquoted value
      j += 4;
    }
    i = text.indexOf('"', j);
  }
  return out.length === 0 ? '{}' : out + '}';
};

function arrayEncoder(element: JsonValueEncoder, delim: string): JsonValueEncoder {
  const delimCode = delim.length === 1 ? delim.charCodeAt(0) : 0x2c;
  return (text) => encodeArrayText(text, element, delimCode);
}

function resolveDomain(oid: number, lookup: (oid: number) => PgTypeInfo | undefined): number {
  let current = oid;
  for (let depth = 0; depth < MAX_DOMAIN_DEPTH; depth++) {
    const info = lookup(current);
    if (info === undefined || info.typtype !== 'd' || info.baseType === 0) return current;
    current = info.baseType;
  }
  return current;
}

/**
 * Builds the encoder for values of type `oid`, following json_categorize_type: domains resolve
 * to their base type, then numbers, bool, date/timestamp(tz), json/jsonb, arrays and composites
 * get their own form, and hstore its cast to json; every other type becomes a JSON string. So do
 * anonymous records (`record`: their field names and types are not in the result) and types
 * with another cast to json (its function runs only in the server).
 */
export function jsonValueEncoder(
  oid: number,
  lookup: (oid: number) => PgTypeInfo | undefined,
  depth = 0,
): JsonValueEncoder {
  if (depth > MAX_NESTING) return encodeString;
  const base = resolveDomain(oid, lookup);
  switch (base) {
    case OID.BOOL:
      return encodeBool;
    case OID.INT2:
    case OID.INT4:
    case OID.INT8:
      return encodeRaw;
    case OID.FLOAT4:
    case OID.FLOAT8:
    case OID.NUMERIC:
      return encodeNumber;
    case OID.DATE:
      return encodeDate;
    case OID.TIMESTAMP:
      return encodeTimestamp;
    case OID.TIMESTAMPTZ:
      return encodeTimestampTz;
    case OID.JSON:
    case OID.JSONB:
      return encodeRaw;
    case ANYARRAY_OID:
    case ANYCOMPATIBLEARRAY_OID:
      // The element type is only known per value on the server; fall back to strings.
      return arrayEncoder(encodeString, ',');
  }
  const info = lookup(base);
  if (info === undefined) return encodeString;
  if (info.elem !== 0) {
    const element = jsonValueEncoder(info.elem, lookup, depth + 1);
    return arrayEncoder(element, lookup(info.elem)?.delim ?? ',');
  }
  if (info.typtype === 'c' && info.attributes !== undefined) {
    return compositeEncoder(
      info.attributes.map((a) => a.name),
      info.attributes.map((a) => jsonValueEncoder(a.type, lookup, depth + 1)),
    );
  }
  if (info.jsonCast === 'hstore') return encodeHstore;
  return encodeString;
}

/**
 * How the JSON of a value of a type is made from its text's bytes (see writeJsonValue), so that
 * the JSON formats copy bytes rather than build strings:
 * - `verbatim`: the text is its JSON (integers, json, jsonb);
 * - `number`: as it is when it is a JSON number, else a string (NaN, Infinity);
 * - `bool`: `t` is true, anything else false;
 * - `date`, `timestamp`, `timestamptz`: quoted, in XSD form (see their encoders);
 * - `string`: a JSON string;
 * - `encoded`: only jsonValueEncoder's function knows (arrays, composites, hstore).
 * Each form gives exactly what jsonValueEncoder's function gives for the same type.
 */
export type JsonValueForm =
  'verbatim' | 'number' | 'bool' | 'date' | 'timestamp' | 'timestamptz' | 'string' | 'encoded';

/** The form of the JSON of values of type `oid` (jsonValueEncoder's cases, in the same order). */
export function jsonValueForm(
  oid: number,
  lookup: (oid: number) => PgTypeInfo | undefined,
): JsonValueForm {
  const base = resolveDomain(oid, lookup);
  switch (base) {
    case OID.BOOL:
      return 'bool';
    case OID.INT2:
    case OID.INT4:
    case OID.INT8:
      return 'verbatim';
    case OID.FLOAT4:
    case OID.FLOAT8:
    case OID.NUMERIC:
      return 'number';
    case OID.DATE:
      return 'date';
    case OID.TIMESTAMP:
      return 'timestamp';
    case OID.TIMESTAMPTZ:
      return 'timestamptz';
    case OID.JSON:
    case OID.JSONB:
      return 'verbatim';
    case ANYARRAY_OID:
    case ANYCOMPATIBLEARRAY_OID:
      return 'encoded';
  }
  const info = lookup(base);
  if (info === undefined) return 'string';
  if (info.elem !== 0) return 'encoded';
  if (info.typtype === 'c' && info.attributes !== undefined) return 'encoded';
  if (info.jsonCast === 'hstore') return 'encoded';
  return 'string';
}

/**
 * Whether to_json() makes an object of values of type `oid` (a composite, hstore): the columnar
 * formats carry those as JSON, PostgreSQL's text form of them being no format a reader knows.
 */
export function isObjectJson(
  oid: number,
  lookup: (oid: number) => PgTypeInfo | undefined,
): boolean {
  const info = lookup(resolveDomain(oid, lookup));
  if (info === undefined || info.elem !== 0) return false;
  return (info.typtype === 'c' && info.attributes !== undefined) || info.jsonCast === 'hstore';
}
