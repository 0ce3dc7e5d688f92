import { ResultLayout } from '@app/contracts';
import { EncoderColumn, TextRow } from './result.encoder';

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

  /** The rows joined by commas, each as `[…]` or `{…}`. */
  write(rows: TextRow[], leadingComma: boolean): string {
    const n = this.encoders.length;
    const close = this.layout === 'collection' ? '}' : ']';
    const empty = this.layout === 'collection' ? '{}' : '[]';
    let out = '';
    for (let r = 0; r < rows.length; r++) {
      if (r > 0 || leadingComma) out += ',';
      if (n === 0) {
        out += empty;
        continue;
      }
      const row = rows[r];
      for (let i = 0; i < n; i++) {
        const v = row[i];
        out += this.prefixes[i];
        out += v === null ? 'null' : this.encoders[i](v);
      }
      out += close;
    }
    return out;
  }
}
