import { Status } from '@app/contracts';
import { builtins, type builtinsTypes } from 'pg-types';
import { EncoderOptions, ResultEncoder } from './result.encoder';
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
    const rows = batch.text();
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

  end(_status: Status, failed: boolean): Buffer | null {
    return failed ? null : Buffer.alloc(0);
  }
}
