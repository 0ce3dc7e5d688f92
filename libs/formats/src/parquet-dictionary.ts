import { ParquetPlainWriter, PlainValueKind } from './parquet-plain.writer';

/**
 * The dictionary of one column chunk: each distinct value once, PLAIN-encoded in order of first
 * appearance (the dictionary page's body), keyed on its PostgreSQL text. PostgreSQL prints a value
 * of a type one way, so equal texts are equal values; two texts of one value would only cost an
 * entry. New entries are counted in the statistics, which repeated values cannot change.
 */
export class ParquetDictionary {
  private readonly entries = new Map<string, number>();
  private readonly values: ParquetPlainWriter;
  // where entry i starts in `values`; it ends where i + 1 starts
  private starts = new Uint32Array(1024);

  constructor(value: PlainValueKind) {
    this.values = new ParquetPlainWriter(value);
  }

  /** Entries. */
  get size(): number {
    return this.entries.size;
  }

  /** Bytes of the entries, PLAIN-encoded. */
  get bytes(): number {
    return this.values.length;
  }

  /** The index of `text`, added if new. */
  indexOf(text: string): number {
    const known = this.entries.get(text);
    if (known !== undefined) return known;
    const i = this.entries.size;
    if (i + 2 > this.starts.length) {
      const next = new Uint32Array(this.starts.length * 2);
      next.set(this.starts);
      this.starts = next;
    }
    this.starts[i] = this.values.length;
    this.values.put(text);
    this.starts[i + 1] = this.values.length;
    this.entries.set(text, i);
    return i;
  }

  /** PLAIN bytes of entry `i`. */
  entryBytes(i: number): number {
    return this.starts[i + 1] - this.starts[i];
  }

  /** Appends entry `i` to a PLAIN page (a page turned back to PLAIN). */
  copyEntry(i: number, to: ParquetPlainWriter): void {
    to.copy(this.values.bytes(), this.starts[i], this.starts[i + 1]);
  }

  /** The dictionary page's body; valid until the dictionary changes. */
  page(): Buffer {
    return this.values.bytes();
  }

  /** Forgets every entry; a buffer grown past `keepBytes` is given back. */
  clear(keepBytes: number): void {
    this.entries.clear();
    this.values.clear(keepBytes);
  }
}
