import { ResultLayout } from '@app/contracts';
import * as sql from '@app/sql';
import type { JsonValueForm } from '@app/sql';
import { EncoderColumn, TextRow } from './result.encoder';
import { RowBatch, utf8Text } from './row.batch';
import { Utf8Builder } from './utf8.builder';

const COMMA = 0x2c;
const NULL = Buffer.from('null', 'latin1');

// Bound once: each call through the lib's index is a getter's call, a tenth of the row loop.
const {
  jsonValueRoom,
  writeJsonBool,
  writeJsonDate,
  writeJsonNumber,
  writeJsonString,
  writeJsonTimestamp,
  writeJsonTimestamptz,
  writeJsonVerbatim,
} = sql;

/** The forms as numbers for the row loop's switch, a call site a form (see writeJsonValue). */
const VERBATIM = 0;
const STRING = 1;
const NUMBER = 2;
const BOOL = 3;
const DATE = 4;
const TIMESTAMP = 5;
const TIMESTAMPTZ = 6;
const ENCODED = 7;
const FORM_CODES: Record<JsonValueForm, number> = {
  verbatim: VERBATIM,
  string: STRING,
  number: NUMBER,
  bool: BOOL,
  date: DATE,
  timestamp: TIMESTAMP,
  timestamptz: TIMESTAMPTZ,
  encoded: ENCODED,
};

/** Writes rows as JSON arrays or objects, from PostgreSQL's text values. */
export class JsonRowWriter {
  private readonly prefixes: string[];
  private readonly prefixBytes: Buffer[];
  private readonly prefixTotal: number;
  private readonly encoders: ((text: string) => string)[];
  private readonly forms: Uint8Array;
  private readonly close: number;

  constructor(
    columns: EncoderColumn[],
    private readonly layout: ResultLayout,
  ) {
    this.encoders = columns.map((c) => c.json);
    this.forms = Uint8Array.from(columns, (c) => FORM_CODES[c.jsonForm ?? 'encoded']);
    this.prefixes = columns.map((c, i) =>
      layout === 'collection'
        ? (i === 0 ? '{' : ',') + JSON.stringify(c.name) + ':'
        : i === 0
          ? '['
          : ',',
    );
    this.prefixBytes = this.prefixes.map((p) => Buffer.from(p, 'utf8'));
    this.prefixTotal = this.prefixBytes.reduce((sum, p) => sum + p.length, 0);
    this.close = (layout === 'collection' ? '}' : ']').charCodeAt(0);
  }

  /** Appends the rows to `out`, joined by commas, each as `[…]` or `{…}` (after a comma too). */
  write(out: Utf8Builder, rows: RowBatch, { leadingComma }: { leadingComma: boolean }): void {
    if (leadingComma && rows.length > 0) out.append(',');
    // A value that is not well-formed UTF-8 (a SQL_ASCII database) is written as its text is.
    if (this.encoders.length === 0 || rows.columns !== this.encoders.length || !rows.utf8) {
      this.writeText(out, rows.text());
    } else {
      this.writeBytes(out, rows);
    }
  }

  /**
   * Each value copied from the batch's bytes as its form says (writeJsonValue's writers, called
   * from a site each); its encoder only where the bytes do not settle it.
   */
  private writeBytes(out: Utf8Builder, rows: RowBatch): void {
    const { starts, ends, length, byteEnd } = rows;
    const src = rows.words;
    const n = this.encoders.length;
    const { forms, prefixBytes, close } = this;
    const fixed = this.prefixTotal + 8 * n + 2;
    for (let r = 0, k = 0; r < length; r++) {
      const first = r * n;
      const span = (r + 1 < length ? starts[first + n] : byteEnd) - starts[first];
      const room = fixed + jsonValueRoom(span);
      let dst = out.reserveWords(room);
      let buf = dst.bytes;
      let at = out.end;
      if (r > 0) buf[at++] = COMMA;
      for (let i = 0; i < n; i++, k++) {
        const prefix = prefixBytes[i];
        for (let p = 0; p < prefix.length; p++) buf[at++] = prefix[p];
        const end = ends[k];
        if (end < 0) {
          for (let p = 0; p < 4; p++) buf[at++] = NULL[p];
          continue;
        }
        const start = starts[k];
        let written: number;
        switch (forms[i]) {
          case VERBATIM:
            at = writeJsonVerbatim(src, start, end, dst, at);
            continue;
          case STRING:
            at = writeJsonString(src, start, end, dst, at);
            continue;
          case NUMBER:
            at = writeJsonNumber(src, start, end, dst, at);
            continue;
          case BOOL:
            at = writeJsonBool(src, start, end, dst, at);
            continue;
          case DATE:
            written = writeJsonDate(src, start, end, dst, at);
            break;
          case TIMESTAMP:
            written = writeJsonTimestamp(src, start, end, dst, at);
            break;
          case TIMESTAMPTZ:
            written = writeJsonTimestamptz(src, start, end, dst, at);
            break;
          default:
            written = -1;
        }
        if (written >= 0) {
          at = written;
          continue;
        }
        out.end = at;
        out.append(this.encoders[i](utf8Text(rows.bytes, start, end)));
        dst = out.reserveWords(room);
        buf = dst.bytes;
        at = out.end;
      }
      buf[at++] = close;
      out.end = at;
    }
  }

  private writeText(out: Utf8Builder, rows: TextRow[]): void {
    const n = this.encoders.length;
    const close = this.layout === 'collection' ? '}' : ']';
    const empty = this.layout === 'collection' ? '{}' : '[]';
    for (let r = 0; r < rows.length; r++) {
      if (r > 0) out.append(',');
      if (n === 0) {
        out.append(empty);
        continue;
      }
      const row = rows[r];
      for (let i = 0; i < n; i++) {
        const v = row[i];
        out.append(this.prefixes[i]);
        out.append(v === null ? 'null' : this.encoders[i](v));
      }
      out.append(close);
    }
  }
}
