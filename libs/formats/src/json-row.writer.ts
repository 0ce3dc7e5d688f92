import { ResultLayout } from '@app/contracts';
import { JsonValueForm, jsonValueRoom, writeJsonValue } from '@app/sql';
import { EncoderColumn, TextRow } from './result.encoder';
import { RowBatch, utf8Text } from './row.batch';
import { Utf8Builder } from './utf8.builder';

const COMMA = 0x2c;
const NULL = Buffer.from('null', 'latin1');

/** Writes rows as JSON arrays or objects, from PostgreSQL's text values. */
export class JsonRowWriter {
  private readonly prefixes: string[];
  private readonly prefixBytes: Buffer[];
  private readonly prefixTotal: number;
  private readonly encoders: ((text: string) => string)[];
  private readonly forms: JsonValueForm[];
  private readonly close: number;

  constructor(
    columns: EncoderColumn[],
    private readonly layout: ResultLayout,
  ) {
    this.encoders = columns.map((c) => c.json);
    this.forms = columns.map((c) => c.jsonForm ?? 'encoded');
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

  /** Each value copied from the batch's bytes as its form says; its encoder only where needed. */
  private writeBytes(out: Utf8Builder, rows: RowBatch): void {
    const { bytes, starts, ends, length, byteEnd } = rows;
    const n = this.encoders.length;
    const { forms, prefixBytes, close } = this;
    const fixed = this.prefixTotal + 8 * n + 2;
    for (let r = 0, k = 0; r < length; r++) {
      const first = r * n;
      const span = (r + 1 < length ? starts[first + n] : byteEnd) - starts[first];
      const room = fixed + jsonValueRoom(span);
      let buf = out.reserve(room);
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
        const form = forms[i];
        if (form === 'verbatim') {
          // Integers and json: the commonest, copied here rather than through a call.
          for (let b = starts[k]; b < end; b++) buf[at++] = bytes[b];
          continue;
        }
        const written = writeJsonValue(form, bytes, starts[k], end, buf, at);
        if (written >= 0) {
          at = written;
          continue;
        }
        out.end = at;
        out.append(this.encoders[i](utf8Text(bytes, starts[k], end)));
        buf = out.reserve(room);
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
