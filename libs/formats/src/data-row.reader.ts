import { RowBatch, VALUE_GAP } from './row.batch';

/**
 * The least a batch's buffers start with, once its first row comes; they grow as rows come, and
 * are handed over with the batch. Small enough for Node's shared pool (under 4 KiB) and V8's heap
 * (64 bytes of offsets): most statements' results are a few rows, for which buffers of their own
 * (ArrayBuffers allocated and freed outside the heap) would cost more than the rows, and a result
 * read whole in one read makes none for a next read.
 */
const FIRST_BYTES = 2 * 1024;
const FIRST_VALUES = 16;
/** The most a new batch's buffer starts with: a batch of huge values is not the next one's size. */
const MOST_INITIAL_BYTES = 8 * 1024 * 1024;
/** A message's type byte and its length. */
const HEADER_BYTES = 5;
const NO_BYTES = Buffer.alloc(0);
const NO_VALUES = new Int32Array(0);

/**
 * Gathers PostgreSQL DataRow messages into a RowBatch, reading each row once: one copy of the
 * message body into the batch's buffer, its field lengths read for where the values are, and no
 * string made. A DataRow body is a 16-bit field count, then for each field a 32-bit length (-1 for
 * NULL) and that many bytes of text; the count and lengths are overwritten with VALUE_GAP in the
 * copy (see RowBatch). pg's parser reuses the buffer a message arrives in, so the row is copied
 * while it is handed over, not kept.
 *
 * A batch's buffers are filled again after the next take: a batch is read before the second read
 * after it starts (as QueryRunner does: it encodes a batch while the next one is read). Allocating
 * them afresh for each read made external memory that V8 collected at a cost.
 *
 * Rows that follow each other in the buffer they came in may be copied together (addLater, then
 * flush): one copy for a socket read's rows, their messages' headers overwritten like the lengths.
 */
export class DataRowReader {
  /** The batch's buffers: none until its first row comes (NO_BYTES, NO_VALUES). */
  private bytes: Buffer = NO_BYTES;
  private used = 0;
  private starts: Int32Array = NO_VALUES;
  private ends: Int32Array = NO_VALUES;
  /** What the next batch's buffers start with: as large as the batch before (likely as large). */
  private nextBytes = FIRST_BYTES;
  private nextValues = FIRST_VALUES;
  private values = 0;
  private rows = 0;
  private columns = -1;
  /** Rows addLater took and flush() copies: `runSource[runFrom, runTo)`, whole messages. */
  private runSource: Uint8Array | undefined;
  private runFrom = 0;
  private runTo = 0;
  /** The buffers of the batch taken last, filled again after the next take. */
  private taken: { bytes: Buffer; starts: Int32Array; ends: Int32Array } | undefined;
  /** The buffers of the batch before it, free since the last take: the next batch's, if they fit. */
  private spare: { bytes: Buffer; starts: Int32Array; ends: Int32Array } | undefined;

  /** Rows gathered since the last take (those taken by addLater once flushed). */
  get length(): number {
    return this.rows;
  }

  /** Adds the DataRow whose body is `source[from, to)`. */
  add(source: Uint8Array, from: number, to: number): void {
    this.flush();
    const size = to - from;
    if (this.used + size > this.bytes.length) this.growBytes(size);
    const base = this.used;
    this.bytes.set(source.subarray(from, to), base);
    this.readRow(base, base + size);
    this.used = base + size;
  }

  /**
   * Takes the DataRow whose body is `source[from, to)`, its header just before it, to be copied
   * by flush() together with the rows that follow it in `source`, which must not change until
   * then.
   */
  addLater(source: Uint8Array, from: number, to: number): void {
    if (source === this.runSource && from - HEADER_BYTES === this.runTo) {
      this.runTo = to;
      return;
    }
    this.flush();
    this.runSource = source;
    this.runFrom = from - HEADER_BYTES;
    this.runTo = to;
  }

  /** Copies the rows addLater took since the last flush, in one piece. */
  flush(): void {
    const source = this.runSource;
    if (source === undefined) return;
    this.runSource = undefined;
    const size = this.runTo - this.runFrom;
    if (this.used + size > this.bytes.length) this.growBytes(size);
    const bytes = this.bytes;
    const base = this.used;
    bytes.set(source.subarray(this.runFrom, this.runTo), base);
    const end = base + size;
    for (let at = base; at < end;) {
      // The length counts itself, not the type byte.
      const rowEnd =
        at +
        1 +
        ((bytes[at + 1] << 24) | (bytes[at + 2] << 16) | (bytes[at + 3] << 8) | bytes[at + 4]);
      for (let i = 0; i < HEADER_BYTES; i++) bytes[at + i] = VALUE_GAP;
      this.readRow(at + HEADER_BYTES, rowEnd);
      at = rowEnd;
    }
    this.used = end;
  }

  /** Reads the row whose body is `bytes[base, end)`, in place: where its values lie. */
  private readRow(base: number, end: number): void {
    const bytes = this.bytes;
    const count = (bytes[base] << 8) | bytes[base + 1];
    if (this.columns < 0) this.columns = count;
    else if (count !== this.columns) throw new Error('a DataRow with another field count');
    if (this.values + count > this.starts.length) this.growValues(count);
    const starts = this.starts;
    const ends = this.ends;
    bytes[base] = VALUE_GAP;
    bytes[base + 1] = VALUE_GAP;
    let at = base + 2;
    let k = this.values;
    for (let c = 0; c < count; c++, k++) {
      // A signed 32-bit length (-1: NULL), read inline: readInt32BE's call and checks were a
      // third of this method's time.
      const length =
        (bytes[at] << 24) | (bytes[at + 1] << 16) | (bytes[at + 2] << 8) | bytes[at + 3];
      bytes[at] = VALUE_GAP;
      bytes[at + 1] = VALUE_GAP;
      bytes[at + 2] = VALUE_GAP;
      bytes[at + 3] = VALUE_GAP;
      at += 4;
      starts[k] = at;
      if (length < 0) {
        ends[k] = -1;
      } else {
        at += length;
        ends[k] = at;
      }
    }
    if (at !== end) throw new Error('a DataRow whose fields do not fill it');
    this.values = k;
    this.rows++;
  }

  /** The rows gathered, as a batch; the reader starts afresh (its buffers go with the batch). */
  take(): RowBatch {
    this.flush();
    if (this.rows === 0) {
      this.columns = -1;
      return RowBatch.EMPTY;
    }
    const batch = new RowBatch(
      this.rows,
      this.columns,
      this.bytes.subarray(0, this.used),
      this.starts.subarray(0, this.values),
      this.ends.subarray(0, this.values),
    );
    // The next read is likely as large as this one: its buffers are made (or the spare's taken)
    // when its first row comes, which a result read whole in one read never has.
    this.nextBytes = Math.max(FIRST_BYTES, Math.min(this.used, MOST_INITIAL_BYTES));
    this.nextValues = Math.max(FIRST_VALUES, this.values);
    this.spare = this.taken;
    this.taken = { bytes: this.bytes, starts: this.starts, ends: this.ends };
    this.bytes = NO_BYTES;
    this.starts = NO_VALUES;
    this.ends = NO_VALUES;
    this.used = 0;
    this.values = 0;
    this.rows = 0;
    this.columns = -1;
    return batch;
  }

  private growBytes(size: number): void {
    const need = this.used + size;
    if (this.bytes.length === 0) {
      const spare = this.spare?.bytes;
      const fits = spare && spare.length >= Math.max(need, this.nextBytes);
      if (fits && spare.length <= 2 * MOST_INITIAL_BYTES) {
        this.bytes = spare;
        return;
      }
      this.bytes = Buffer.allocUnsafe(Math.max(need, this.nextBytes));
      return;
    }
    const next = Buffer.allocUnsafe(Math.max(need, 2 * this.bytes.length));
    this.bytes.copy(next, 0, 0, this.used);
    this.bytes = next;
  }

  private growValues(count: number): void {
    const need = this.values + count;
    if (this.starts.length === 0) {
      const spare = this.spare;
      const least = Math.max(need, this.nextValues);
      this.starts = spare && spare.starts.length >= least ? spare.starts : new Int32Array(least);
      this.ends = spare && spare.ends.length >= least ? spare.ends : new Int32Array(least);
      return;
    }
    const size = Math.max(need, 2 * this.starts.length);
    const starts = new Int32Array(size);
    const ends = new Int32Array(size);
    starts.set(this.starts.subarray(0, this.values));
    ends.set(this.ends.subarray(0, this.values));
    this.starts = starts;
    this.ends = ends;
  }
}
