import { Status, isFailure } from '@app/contracts';
import { builtins, type builtinsTypes } from 'pg-types';
import { EncoderOptions, ResultEncoder, TextRow } from './result.encoder';
import { RowBatch } from './row.batch';
import { Utf8Builder } from './utf8.builder';

// PostgreSQL's built-in type OIDs, as plain numbers (pg-types types them as an enum).
const OID: Readonly<Record<builtinsTypes, number>> = builtins;

const CRLF = '\r\n';
const SPACE = 32;
const SPECIAL = /[",\r\n]/;
const QUOTE = /"/g;

/** One field: quoted only when needed, `""` for the empty string so it differs from NULL. */
function field(text: string): string {
  const n = text.length;
  if (
    n === 0 ||
    SPECIAL.test(text) ||
    text.charCodeAt(0) === SPACE ||
    text.charCodeAt(n - 1) === SPACE
  ) {
    return '"' + text.replace(QUOTE, '""') + '"';
  }
  return text;
}

const COMMA = 0x2c;
const DQUOTE = 0x22;
const CR = 0x0d;
const LF = 0x0a;
const TRUE = Buffer.from('true');
const FALSE = Buffer.from('false');

/** field() of the UTF-8 `src[start, end)`, written at `dst[at]`; where it ends. */
function writeField(src: Uint8Array, start: number, end: number, dst: Uint8Array, at: number) {
  let quote = start === end || src[start] === SPACE || src[end - 1] === SPACE;
  for (let i = start; !quote && i < end; i++) {
    const c = src[i];
    quote = c === DQUOTE || c === COMMA || c === CR || c === LF;
  }
  if (!quote) {
    for (let i = start; i < end; i++) dst[at++] = src[i];
    return at;
  }
  dst[at++] = DQUOTE;
  for (let i = start; i < end; i++) {
    const c = src[i];
    if (c === DQUOTE) dst[at++] = DQUOTE;
    dst[at++] = c;
  }
  dst[at++] = DQUOTE;
  return at;
}

/** A boolean's `t` or `f` as `true` or `false`; anything else as a field. */
function writeBool(src: Uint8Array, start: number, end: number, dst: Uint8Array, at: number) {
  const word =
    end - start !== 1
      ? undefined
      : src[start] === 0x74
        ? TRUE
        : src[start] === 0x66
          ? FALSE
          : undefined;
  if (word === undefined) return writeField(src, start, end, dst, at);
  for (let i = 0; i < word.length; i++) dst[at++] = word[i];
  return at;
}

/**
 * text/csv (RFC 4180): a header row of column names, then one line per row, every line ending in
 * CRLF. A field is quoted only when it contains `"`, `,`, CR or LF, or begins or ends with a
 * space; `"` is doubled inside quotes. NULL is an empty unquoted field and the empty string is
 * `""`, so the two stay distinguishable. Values are PostgreSQL's text output as is (arrays in
 * `{…}` form) except booleans, written `true`/`false`. With zero columns the header and every
 * row are empty lines, as PostgreSQL's `COPY … (FORMAT csv, HEADER)` writes them, so the row
 * count survives. CSV cannot carry a status: `end` is empty on success and null on failure
 * (the response is aborted).
 */
export class CsvEncoder implements ResultEncoder {
  private readonly bool: boolean[];
  private readonly out = new Utf8Builder();

  constructor(private readonly options: EncoderOptions) {
    // RowDescription reports a domain's base type, so this also covers domains over boolean.
    this.bool = options.columns.map((c) => c.oid === OID.BOOL);
  }

  head(): Buffer {
    return Buffer.from(this.options.columns.map((c) => field(c.name)).join(',') + CRLF);
  }

  rows(batch: RowBatch): Buffer {
    if (batch.columns !== this.bool.length || !batch.utf8) return this.textRows(batch.text());
    const { bytes, starts, ends, length, byteEnd } = batch;
    const bool = this.bool;
    const n = bool.length;
    const out = this.out;
    for (let r = 0, k = 0; r < length; r++) {
      const first = r * n;
      const span = n === 0 ? 0 : (r + 1 < length ? starts[first + n] : byteEnd) - starts[first];
      // Every byte a doubled quote, two quotes, `true` and a comma a value, CRLF.
      const buf = out.reserve(2 * span + 8 * n + 2);
      let at = out.end;
      for (let i = 0; i < n; i++, k++) {
        if (i > 0) buf[at++] = COMMA;
        const end = ends[k];
        if (end < 0) continue;
        at = bool[i]
          ? writeBool(bytes, starts[k], end, buf, at)
          : writeField(bytes, starts[k], end, buf, at);
      }
      buf[at++] = CR;
      buf[at++] = LF;
      out.end = at;
    }
    return out.take();
  }

  reuse(chunk: Buffer): void {
    this.out.reuse(chunk);
  }

  private textRows(rows: TextRow[]): Buffer {
    const bool = this.bool;
    const n = bool.length;
    const out = this.out;
    for (let r = 0; r < rows.length; r++) {
      const row = rows[r];
      for (let i = 0; i < n; i++) {
        if (i > 0) out.append(',');
        const v = row[i];
        if (v === null) continue;
        if (bool[i]) out.append(v === 't' ? 'true' : v === 'f' ? 'false' : field(v));
        else out.append(field(v));
      }
      out.append(CRLF);
    }
    return out.take();
  }

  end(status: Status): Buffer | null {
    return isFailure(status) ? null : Buffer.alloc(0);
  }
}
