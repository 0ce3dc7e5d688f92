import { Column, ExecuteJobData, ResultRecord, Status } from '@app/contracts';
import { ChunkCompressor } from '@app/formats';
import { ProducerStoppedError, ResultWriter } from '@app/transport';

/**
 * A held result and its end as one `end` record carrying the whole body and its rows — one
 * entry to write, read and send in one piece — when it fits in an entry and ends well.
 */
function wholeBody(
  held: ResultRecord[],
  end: Extract<ResultRecord, { kind: 'end' }>,
  maxEntryBytes: number,
): ResultRecord | undefined {
  if (end.abort) return undefined;
  const parts: Buffer[] = [];
  let rows = 0;
  for (const record of held) {
    if (record.kind === 'data') rows += record.rows;
    else if (record.kind !== 'head') return undefined;
    parts.push(record.bytes);
  }
  parts.push(end.bytes);
  const bytes = Buffer.concat(parts);
  if (bytes.length > maxEntryBytes) return undefined;
  const { status, startedAt, streamingAt } = end;
  return { kind: 'end', status, bytes, rows, startedAt, streamingAt };
}

/**
 * Writes a response body to the result channel: compresses it when asked (flushed per chunk),
 * splits chunks so that no entry exceeds the cap, and counts the bytes.
 */
export class BodyWriter {
  private readonly compressor: ChunkCompressor | undefined;
  /** Body bytes written so far (after compression). */
  bytes = 0;
  /** Body bytes the encoder made so far (before compression). */
  encodedBytes = 0;
  /** Some of the body was handed over: written, or held by the compressor until the first rows. */
  private begun = false;
  /** Records held back to go out with the final status in one round trip. */
  private held: ResultRecord[] | undefined;
  /** When the statement began (ms): its final record carries it for the registry. */
  private readonly startedAt = Date.now();
  /**
   * When the statement's first rows (or its head: a statement without rows has only that) came
   * to be written (ms): the query streams from then. Its final record carries it for the registry.
   */
  streamingAt: number | undefined;
  /**
   * The bytes of a chunk that a refused write (a stop) left unsent. The encoder's and the
   * compressor's state count them as sent, so the body's end sends them first: without them a
   * compressed body no longer decodes (and Node's fetch waits on it for good), and a chunk split
   * over entries would end mid-row.
   */
  private unsent: Buffer | undefined;

  constructor(
    private readonly writer: ResultWriter,
    job: ExecuteJobData,
    private readonly maxEntryBytes: number,
  ) {
    if (job.encoding) this.compressor = new ChunkCompressor(job.encoding.name, job.encoding.level);
  }

  /**
   * Whether any of the body may have reached the client: not while it is all held back (a
   * failure then is answered with the error envelope, not as a body ending in an error).
   */
  get started(): boolean {
    return this.begun && this.held === undefined;
  }

  /**
   * The rest of the result is known to be small (the cursor returned its last batch): hold what
   * follows and send it with the final status, in one round trip instead of three.
   */
  holdUntilEnd(): void {
    this.held ??= [];
  }

  /**
   * Whether what data() was given may still be kept once it resolved: while the body is held
   * until its end. Otherwise a chunk whose data() resolved was compressed or written, and nothing
   * here or in the result writers keeps it (the in-process channel copies what it posts, the
   * spool copies into its segment, Redis's append completes with its reply).
   */
  get holding(): boolean {
    return this.held !== undefined;
  }

  private async write(record: ResultRecord): Promise<void> {
    if (this.held) this.held.push(record);
    else await this.writer.write(record);
  }

  private async finish(end: Extract<ResultRecord, { kind: 'end' }>): Promise<void> {
    const held = this.held;
    this.held = undefined;
    if (!held || held.length === 0) return this.writer.write(end);
    const whole = wholeBody(held, end, this.maxEntryBytes);
    await this.writer.writeFinal(whole ? [whole] : [...held, end]);
  }

  async head(columns: Column[], chunk: Buffer): Promise<void> {
    this.streamingAt ??= Date.now();
    // The compressor picks its setting on the first rows, so it holds the head until they come.
    this.encodedBytes += chunk.length;
    const bytes = await this.compress(chunk, 'hold');
    const max = this.maxEntryBytes;
    this.bytes += bytes.length;
    await this.whole(bytes, () =>
      this.write({ kind: 'head', columns, bytes: bytes.subarray(0, max) }),
    );
    for (let at = max; at < bytes.length; at += max) {
      await this.whole(bytes.subarray(at), () =>
        this.write({ kind: 'data', rows: 0, bytes: bytes.subarray(at, at + max) }),
      );
    }
  }

  async data(rows: number, chunk: Buffer): Promise<void> {
    this.streamingAt ??= Date.now();
    this.encodedBytes += chunk.length;
    const bytes = await this.compress(chunk, 'push');
    this.bytes += bytes.length;
    const max = this.maxEntryBytes;
    if (bytes.length === 0) {
      if (rows > 0) await this.write({ kind: 'data', rows, bytes });
      return;
    }
    for (let at = 0; at < bytes.length; at += max) {
      await this.whole(bytes.subarray(at), () =>
        this.write({
          kind: 'data',
          rows: at === 0 ? rows : 0,
          bytes: bytes.subarray(at, at + max),
        }),
      );
    }
  }

  /** Runs the write of the first bytes of `rest`; when a stop refuses it, `rest` is left unsent. */
  private async whole(rest: Buffer, write: () => Promise<void>): Promise<void> {
    try {
      await write();
    } catch (err) {
      // A writer refuses a record it did not write; any other failure lost the channel itself.
      if (err instanceof ProducerStoppedError) this.unsent = rest;
      throw err;
    }
  }

  /** The last bytes and the final status; `tail` null means the body cannot end well: abort it. */
  async end(status: Status, tail: Buffer | null): Promise<void> {
    if (tail === null) {
      this.compressor?.destroy();
      await this.finish({
        kind: 'end',
        status,
        bytes: Buffer.alloc(0),
        abort: true,
        startedAt: this.startedAt,
        streamingAt: this.streamingAt,
      });
      return;
    }
    this.encodedBytes += tail.length;
    const last = this.compressor ? await this.compressor.finish(tail) : tail;
    this.bytes += last.length;
    const max = this.maxEntryBytes;
    const unsent = this.unsent;
    if (unsent) {
      // After a refused write only the final record is taken: all that is left goes in it, or,
      // when that is more than an entry holds, the body is cut (abort) rather than end torn.
      this.unsent = undefined;
      const bytes = Buffer.concat([unsent, last]);
      const fits = bytes.length <= max;
      await this.finish({
        kind: 'end',
        status,
        bytes: fits ? bytes : Buffer.alloc(0),
        ...(fits ? {} : { abort: true }),
        startedAt: this.startedAt,
        streamingAt: this.streamingAt,
      });
      return;
    }
    const bytes = last;
    let at = 0;
    for (; bytes.length - at > max; at += max) {
      await this.write({ kind: 'data', rows: 0, bytes: bytes.subarray(at, at + max) });
    }
    await this.finish({
      kind: 'end',
      status,
      bytes: bytes.subarray(at),
      startedAt: this.startedAt,
      streamingAt: this.streamingAt,
    });
  }

  /** Ends before any byte of the body: the api answers with the error envelope. */
  async fail(status: Status): Promise<void> {
    this.compressor?.destroy();
    this.held = undefined;
    await this.writer.write({ kind: 'error', status, startedAt: this.startedAt });
  }

  /** `chunk` through the compressor, if any: held back with the head ('hold'), or sent on. */
  private compress(chunk: Buffer, how: 'hold' | 'push'): Promise<Buffer> | Buffer {
    // Nothing to say yet: not even the compressor's header, so that the body has not started.
    if (chunk.length === 0) return chunk;
    this.begun = true;
    if (!this.compressor) return chunk;
    return how === 'hold' ? this.compressor.hold(chunk) : this.compressor.push(chunk);
  }
}
