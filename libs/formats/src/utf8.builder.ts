import { WordBytes, wordBytes } from '@app/sql';
import { utf8Room, writeUtf8 } from './pg-text.decoder';

/** Strings at least this long go to Buffer's native UTF-8 writer in one call. */
const NATIVE_FROM = 256;
/** Past this, a buffer grows by an eighth rather than doubling, and is not kept after its chunk. */
const LARGE_BYTES = 4 * 1024 * 1024;
/** A chunk at least this long gets a buffer of its own that may be handed back (reuse). */
const REUSABLE_FROM = 64 * 1024;

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
  /** `buf` with a DataView over it, made when asked for and again when `buf` is replaced. */
  private words: WordBytes | undefined;
  /** The memory of chunks take() made, which reuse() may hand back. */
  private readonly made = new WeakSet<ArrayBufferLike>();
  /** A chunk's memory handed back: the next take() that fits copies into it. */
  private spare: Buffer | undefined;

  constructor(private readonly initialBytes = 1024) {
    this.buf = Buffer.allocUnsafe(initialBytes);
  }

  /** Bytes the builder holds for the chunk it builds (and the next). */
  get capacity(): number {
    return this.buf.length;
  }

  append(text: string): void {
    this.grow(utf8Room(text));
    const n = text.length;
    if (n >= NATIVE_FROM) {
      this.length += writeUtf8(this.buf, text, this.length);
      return;
    }
    const buf = this.buf;
    let at = this.length;
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c >= 0x80) {
        // Everything before i was ASCII, so no surrogate pair is cut here.
        at += writeUtf8(buf, i === 0 ? text : text.slice(i), at);
        this.length = at;
        return;
      }
      buf[at++] = c;
    }
    this.length = at;
  }

  /** The bytes appended since the last take, in a Buffer of their own; the builder starts over. */
  take(): Buffer {
    const length = this.length;
    this.length = 0;
    if (this.buf.length > LARGE_BYTES) {
      // A chunk grown this large (a huge value) is handed over as it is, not copied or kept.
      const out = this.buf.subarray(0, length);
      this.buf = Buffer.allocUnsafe(this.initialBytes);
      this.words = undefined;
      return out;
    }
    const spare = this.spare;
    if (spare && spare.length >= length) {
      this.spare = undefined;
      this.buf.copy(spare, 0, 0, length);
      return spare.subarray(0, length);
    }
    if (length < REUSABLE_FROM) {
      const out = Buffer.allocUnsafe(length);
      this.buf.copy(out, 0, 0, length);
      return out;
    }
    // Not from Node's shared pool: memory of its own, which reuse() can take back whole; an
    // eighth more than this chunk, so that the next chunks, a few rows longer or shorter, fit.
    const memory = Buffer.allocUnsafeSlow(length + (length >> 3));
    this.buf.copy(memory, 0, 0, length);
    this.made.add(memory.buffer);
    return memory.subarray(0, length);
  }

  /**
   * `chunk`, which take() returned, is no longer used by anyone (its write completed): a later
   * take() may copy its chunk into the same memory instead of new memory. Each large chunk in
   * new memory was external memory for V8 to account for, and a result's stream of them started
   * the thread's mark-compacts (bench/RESULTS.md). Anything else is ignored.
   */
  reuse(chunk: Buffer): void {
    const memory = chunk.buffer;
    if (!this.made.has(memory)) return;
    if (this.spare && this.spare.length >= memory.byteLength) return;
    this.spare = Buffer.from(memory, 0, memory.byteLength);
  }

  /** Where the next byte goes; a writer that wrote into reserve()'s buffer moves it on. */
  get end(): number {
    return this.length;
  }

  set end(at: number) {
    this.length = at;
  }

  /** Makes room for `bytes` more bytes from `end`: the buffer to write them into. */
  reserve(bytes: number): Buffer {
    this.grow(bytes);
    return this.buf;
  }

  /** As reserve, with a DataView over the buffer for the JSON value writers. */
  reserveWords(bytes: number): WordBytes {
    this.grow(bytes);
    return (this.words ??= wordBytes(this.buf));
  }

  private grow(bytes: number): void {
    const need = this.length + bytes;
    if (need <= this.buf.length) return;
    // Doubling keeps appends cheap; past LARGE_BYTES it would double for one closing quote.
    const size =
      this.buf.length < LARGE_BYTES ? Math.max(2 * this.buf.length, need) : need + (need >> 3);
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
    this.words = undefined;
  }
}
