import { ResultLayout } from '@app/contracts';
import { EncoderColumn, TextRow } from './result.encoder';
import { Utf8Builder } from './utf8.builder';

/** Writes rows as JSON arrays or objects, from PostgreSQL's text values. */
export class JsonRowWriter {
  private readonly prefixes: string[];
  private readonly encoders: ((text: string) => string)[];

  constructor(
    columns: EncoderColumn[],
    private readonly layout: ResultLayout,
  ) {
    this.encoders = columns.map((c) => c.json);
    this.prefixes = columns.map((c, i) =>
      layout === 'collection'
        ? (i === 0 ? '{' : ',') + JSON.stringify(c.name) + ':'
        : i === 0
          ? '['
          : ',',
    );
  }

  /** Appends the rows to `out`, joined by commas, each as `[…]` or `{…}`. */
  write(out: Utf8Builder, rows: TextRow[], leadingComma: boolean): void {
    const n = this.encoders.length;
    const close = this.layout === 'collection' ? '}' : ']';
    const empty = this.layout === 'collection' ? '{}' : '[]';
    for (let r = 0; r < rows.length; r++) {
      if (r > 0 || leadingComma) out.append(',');
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
