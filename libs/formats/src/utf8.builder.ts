/** Strings at least this long go to Buffer's native UTF-8 writer in one call. */
const NATIVE_FROM = 256;
/** A buffer grown past this for one large chunk is not kept for the next one. */
const MAX_KEPT_BYTES = 4 * 1024 * 1024;

/**
 * Builds one chunk's bytes from many short strings, as `Buffer.from(a + b + …)` would give them,
 * without the string. A chunk of rows joined with `+=` is a rope of tens of thousands of pieces,
 * and flattening it in `Buffer.from` took most of the time that turned 1,000 rows into bytes
 * (bench/RESULTS.md); this copies each piece once, ASCII byte by byte, into a buffer kept from
 * chunk to chunk.
 */
export class Utf8Builder {
  private buf: Buffer;
  private length = 0;

  constructor(private readonly initialBytes = 1024) {
    this.buf = Buffer.allocUnsafe(initialBytes);
  }

  /** Bytes the builder holds for the chunk it builds (and the next). */
  get capacity(): number {
    return this.buf.length;
  }

  append(text: string): void {
    const n = text.length;
    if (n >= NATIVE_FROM) {
      this.reserve(Buffer.byteLength(text));
      this.length += this.buf.write(text, this.length);
      return;
    }
    // UTF-8 takes at most three bytes per UTF-16 unit (a surrogate pair: four for two).
    this.reserve(3 * n);
    const buf = this.buf;
    let at = this.length;
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c >= 0x80) {
        // Everything before i was ASCII, so no surrogate pair is cut here.
        at += buf.write(i === 0 ? text : text.slice(i), at);
        this.length = at;
        return;
      }
      buf[at++] = c;
    }
    this.length = at;
  }

  /** The bytes appended since the last take, in a Buffer of their own; the builder starts over. */
  take(): Buffer {
    const out = Buffer.allocUnsafe(this.length);
    this.buf.copy(out, 0, 0, this.length);
    this.length = 0;
    if (this.buf.length > MAX_KEPT_BYTES) this.buf = Buffer.allocUnsafe(this.initialBytes);
    return out;
  }

  private reserve(bytes: number): void {
    if (this.length + bytes <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(2 * this.buf.length, this.length + bytes));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
}
