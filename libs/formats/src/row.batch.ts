import { isAscii, isUtf8 } from 'node:buffer';
import { WordBytes, wordBytes } from '@app/sql';

/** A text value as PostgreSQL sent it, or null. */
export type TextRow = (string | null)[];

type RawSlice = (this: Buffer, start: number, end: number) => string;
// Buffer#utf8Slice skips toString()'s argument parsing, a value at a time.
const utf8Slice: RawSlice =
  (Buffer.prototype as unknown as Record<string, RawSlice | undefined>).utf8Slice ??
  function (this: Buffer, start: number, end: number) {
    return this.toString('utf8', start, end);
  };

/** The text of the UTF-8 `bytes[start, end)`. */
export function utf8Text(bytes: Buffer, start: number, end: number): string {
  return utf8Slice.call(bytes, start, end);
}

/**
 * The most bytes decoded into one string: V8 puts a string past 128 KiB in its large-object
 * space, which only a full collection frees, and a batch's would pile up there between them.
 */
const TEXT_PIECE_BYTES = 32 * 1024;

/** Between two values in `bytes`: ASCII, so that the values' own bytes decide isAscii/isUtf8. */
export const VALUE_GAP = 0x20;

/**
 * The rows of one read, as PostgreSQL sent their text values: every value's UTF-8 bytes in one
 * buffer, with where each starts and ends. The JSON encoders copy values from it byte for byte,
 * and Parquet's column writers read them from it; the others take each value's text (`text()`),
 * decoded once for the whole batch. Value `c` of
 * row `r` is at index `r * columns + c` of `starts` and `ends`; a NULL ends at -1. Between values
 * the buffer holds only VALUE_GAP bytes, so that a test of the whole buffer tells about the values.
 */
export class RowBatch {
  static readonly EMPTY = new RowBatch(0, 0, Buffer.alloc(0), new Int32Array(0), new Int32Array(0));

  private rowsText: TextRow[] | undefined;
  private validUtf8: boolean | undefined;
  private wordsOf: WordBytes | undefined;

  constructor(
    /** Rows in the batch. */
    readonly length: number,
    /** Values in each row. */
    readonly columns: number,
    readonly bytes: Buffer,
    readonly starts: Int32Array,
    readonly ends: Int32Array,
    /** Where in `bytes` this batch's values lie (a slice shares its batch's bytes). */
    readonly byteStart = 0,
    readonly byteEnd = bytes.length,
  ) {}

  /** `bytes` with a DataView over them, for the JSON value writers (made once). */
  get words(): WordBytes {
    return (this.wordsOf ??= wordBytes(this.bytes));
  }

  /** Rows `from` to `to` (not included), sharing this batch's bytes. */
  slice(from: number, to: number): RowBatch {
    const end = Math.min(to, this.length);
    if (from === 0 && end === this.length) return this;
    if (from >= end) return RowBatch.EMPTY;
    const c = this.columns;
    const byteStart = c === 0 ? 0 : this.starts[from * c];
    const byteEnd = c === 0 ? 0 : end < this.length ? this.starts[end * c] : this.byteEnd;
    return new RowBatch(
      end - from,
      c,
      this.bytes,
      this.starts.subarray(from * c, end * c),
      this.ends.subarray(from * c, end * c),
      byteStart,
      byteEnd,
    );
  }

  /** A batch of the given texts (tests, and anything that has strings rather than bytes). */
  static fromText(rows: readonly TextRow[]): RowBatch {
    if (rows.length === 0) return RowBatch.EMPTY;
    const columns = rows[0].length;
    const parts: Buffer[] = [];
    const starts = new Int32Array(rows.length * columns);
    const ends = new Int32Array(rows.length * columns);
    const gap = Buffer.from([VALUE_GAP]);
    let at = 0;
    let k = 0;
    for (const row of rows) {
      if (row.length !== columns) throw new Error('every row of a batch has the same columns');
      for (const value of row) {
        parts.push(gap);
        at += 1;
        starts[k] = at;
        if (value === null) {
          ends[k++] = -1;
          continue;
        }
        const bytes = Buffer.from(value, 'utf8');
        parts.push(bytes);
        at += bytes.length;
        ends[k++] = at;
      }
    }
    return new RowBatch(rows.length, columns, Buffer.concat(parts, at), starts, ends);
  }

  /**
   * True when every value is well-formed UTF-8 (always, but for a database whose encoding is
   * SQL_ASCII): only then are its bytes what the value's text would be written as.
   */
  get utf8(): boolean {
    return (this.validUtf8 ??= isUtf8(this.range()));
  }

  /** Each row's values as text, decoded once and kept. */
  text(): TextRow[] {
    return (this.rowsText ??= this.decode());
  }

  private range(): Buffer {
    return this.bytes.subarray(this.byteStart, this.byteEnd);
  }

  private decode(): TextRow[] {
    const { length, columns, bytes, starts, ends } = this;
    const rows: TextRow[] = new Array<TextRow>(length);
    if (columns === 0) {
      for (let r = 0; r < length; r++) rows[r] = [];
      return rows;
    }
    const rowEnd = (r: number) => (r + 1 < length ? starts[(r + 1) * columns] : this.byteEnd);
    for (let r = 0, k = 0; r < length;) {
      // Rows of up to TEXT_PIECE_BYTES at a time: when they are all ASCII (the common case), one
      // string for them, each value a slice of it.
      const from = starts[r * columns];
      let to = r + 1;
      while (to < length && rowEnd(to) - from <= TEXT_PIECE_BYTES) to++;
      const piece = bytes.subarray(from, rowEnd(to - 1));
      const all = isAscii(piece) ? piece.toString('latin1') : undefined;
      for (; r < to; r++) {
        const row: TextRow = new Array<string | null>(columns);
        for (let c = 0; c < columns; c++, k++) {
          const end = ends[k];
          row[c] =
            end < 0
              ? null
              : all !== undefined
                ? all.substring(starts[k] - from, end - from)
                : utf8Slice.call(bytes, starts[k], end);
        }
        rows[r] = row;
      }
    }
    return rows;
  }
}
