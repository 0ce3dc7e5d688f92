import type { ResultManifest, ResultSegmentBytes } from './client.types';
import { SluiceClientError } from './sluice-client.error';

/** What `segmentBytes` needs beside the first manifest. */
export interface SegmentSource {
  queryId: string;
  /** The manifest as it is now: more segments while the query runs, fresh URLs. */
  refresh: () => Promise<ResultManifest>;
  /** Reads a presigned URL (no credential of the service's goes with it). */
  fetch: typeof fetch;
  /** Segments downloaded at once (1 or more). */
  parallel: number;
  /** Tries of one segment before its failure is the download's. */
  attempts: number;
  /**
   * How long a try may wait for the store's next byte (its answer's head included) before it is
   * dropped and the segment tried again from where it stopped (ms).
   */
  idleMs: number;
  signal?: AbortSignal;
}

/** How long to wait before asking again for the segments of a query that still runs (ms). */
const POLL_MS = { first: 100, most: 1000 };

/**
 * The body of a spooled kept result, read straight from the store by its segments' presigned
 * URLs: `parallel` downloads at once, the bytes yielded in order. While the query runs the
 * manifest is asked again for the segments written since. A download that breaks resumes with
 * Range where it stopped, one refused (a URL expired) is tried with a fresh URL, and each
 * segment must be the size the manifest gives, so that a short read is never taken for the whole.
 *
 * The segment being given out is yielded as it comes, a piece at a time; each download behind it
 * holds AHEAD_BYTES (and a piece it hands over, one it gathers) until its turn, and then waits:
 * whatever the segment size, the read holds about `parallel` × AHEAD_BYTES. A segment that turns
 * out not to be the size listed once bytes of it were given out cannot be read again (they were
 * yielded already): the read fails, naming it.
 */
export async function* segmentBytes(
  first: ResultManifest,
  source: SegmentSource,
): AsyncGenerator<Uint8Array> {
  const reads = new SegmentDownloads(first, source);
  const pieces = new InOrder(AHEAD_BYTES);
  let started = 0;
  // Only segments within `parallel` of the one given out: what waits its turn is bounded.
  const refill = () => {
    while (started < reads.manifest.segments.length && started < pieces.next + source.parallel) {
      const index = started++;
      const hand = (piece: ResultSegmentBytes, last: boolean) => pieces.give(index, piece, last);
      reads.start(index, { hand, again: false }).catch((err: unknown) => pieces.fail(err));
    }
  };
  try {
    for (;;) {
      refill();
      if (pieces.next < started) {
        const { parts, last, taken } = await pieces.take();
        if (last) {
          reads.gave();
          // The next download starts now, while this segment's last bytes are taken.
          refill();
        }
        // As they came: joining a piece's parts would copy every byte once more.
        for (const part of parts) yield part;
        taken();
      } else if (await reads.ended()) return;
    }
  } finally {
    pieces.close();
    reads.close();
  }
}

/**
 * Bytes a download of `segmentBytes` holds for the consumer, beyond the piece it gathers, before it
 * waits for the consumer to take them: the service's default segment size, so that at the
 * defaults every download behind the one given out runs to its end, as they all did when each
 * segment was held whole; a larger segment no longer multiplies the client's memory.
 */
export const AHEAD_BYTES = 16 * 1024 * 1024;

/**
 * The pieces downloads hand to the one consumer of `segmentBytes`, given out in the result's
 * order: those of segment `next` as they come, then the next segment's. A piece is taken — its
 * download may hand the next — at once while its segment holds no more than `ahead` bytes not
 * given out, else once the consumer has taken it.
 */
class InOrder {
  /** The segment whose pieces are given out now. */
  next = 0;
  private readonly held = new Map<number, HeldPieces>();
  private wakeUp: (() => void) | undefined;
  private failure: { err: unknown } | undefined;
  private closed = false;

  constructor(private readonly ahead: number) {}

  /** Resolves once `piece` of segment `index` is taken; rejects if the read ends first. */
  give(index: number, piece: ResultSegmentBytes, last: boolean): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the read of the segments ended'));
    let segment = this.held.get(index);
    if (!segment) this.held.set(index, (segment = { pieces: [], bytes: 0 }));
    const held = segment;
    const bytes = piece.parts.reduce((sum, part) => sum + part.byteLength, 0);
    return new Promise((taken, dropped) => {
      held.pieces.push({ parts: piece.parts, bytes, last, taken, dropped, early: false });
      held.bytes += bytes;
      this.takeEarly(held);
      if (index === this.next) this.wake();
    });
  }

  /** A download failed for good: the consumer is told at its next take. */
  fail(err: unknown): void {
    this.failure ??= { err };
    this.wake();
  }

  /**
   * The next piece of the result, in order: its parts, whether it ends its segment (then `next`
   * is the following one), and `taken`, to call once the consumer is done with it.
   */
  async take(): Promise<{ parts: Uint8Array[]; last: boolean; taken: () => void }> {
    for (;;) {
      if (this.failure) throw this.failure.err;
      const segment = this.held.get(this.next);
      const piece = segment?.pieces.shift();
      if (segment && piece) {
        segment.bytes -= piece.bytes;
        if (piece.last) this.held.delete(this.next++);
        else this.takeEarly(segment);
        return { parts: piece.parts, last: piece.last, taken: piece.early ? noop : piece.taken };
      }
      await new Promise<void>((resolve) => (this.wakeUp = resolve));
    }
  }

  /** The read ended: pieces not taken are dropped, and their downloads stop. */
  close(): void {
    this.closed = true;
    for (const { pieces } of this.held.values()) {
      for (const piece of pieces.splice(0)) {
        if (!piece.early) piece.dropped(new Error('the read of the segments ended'));
      }
    }
    this.held.clear();
  }

  /** Takes the segment's pieces not taken yet, oldest first, while it holds no more than `ahead`. */
  private takeEarly(segment: HeldPieces): void {
    if (segment.bytes > this.ahead) return;
    for (const piece of segment.pieces) {
      if (piece.early) continue;
      piece.early = true;
      piece.taken();
    }
  }

  private wake(): void {
    const wakeUp = this.wakeUp;
    this.wakeUp = undefined;
    wakeUp?.();
  }
}

/** A segment's pieces waiting to be given out, and their bytes. */
interface HeldPieces {
  pieces: {
    parts: Uint8Array[];
    bytes: number;
    last: boolean;
    taken: () => void;
    dropped: (err: Error) => void;
    /** Taken before it was given out (its segment held little enough). */
    early: boolean;
  }[];
  bytes: number;
}

function noop(): void {}

/**
 * Bytes a download of `segmentsAsTheyCome` gathers before it hands them over: a writer gets few
 * large writes, and a download holds at most two such pieces (one waiting to be taken, one being
 * gathered), whatever the segment's size.
 */
export const PIECE_BYTES = 1024 * 1024;

/**
 * The bytes of a spooled kept result as `segmentBytes` reads them (`parallel` downloads at once,
 * the same retries, fresh URLs and size checks, the manifest asked again while the query runs),
 * each segment's in pieces of about PIECE_BYTES with their offsets, handed over as they come from
 * whichever download has them: for a writer that can put bytes at an offset (a file), which then
 * never holds bytes back for earlier ones still on their way, nor a whole segment in memory. A
 * segment read again (it came short, or long) is handed over again from its start, at the same
 * offsets: what was written of it is written over. Together they are the result's bytes: the
 * iteration ends only once the manifest says the result is complete and its segments cover its
 * size.
 */
export async function* segmentsAsTheyCome(
  first: ResultManifest,
  source: SegmentSource,
): AsyncGenerator<ResultSegmentBytes> {
  const reads = new SegmentDownloads(first, source);
  const pieces = new Handover();
  let started = 0;
  let running = 0;
  const refill = () => {
    while (started < reads.manifest.segments.length && running < source.parallel) {
      const index = started++;
      running++;
      const hand = (piece: ResultSegmentBytes, last: boolean) => {
        // Its last piece is checked and whole: the next download may start before it is taken.
        if (last) {
          running--;
          reads.gave();
        }
        return pieces.give(piece);
      };
      reads.start(index, { hand, again: true }).catch((err: unknown) => {
        running--;
        pieces.fail(err);
      });
    }
  };
  try {
    for (;;) {
      refill();
      if (running > 0 || pieces.waiting) {
        const next = await pieces.next();
        // A download that handed its last piece is replaced before that piece is taken: one at a
        // time, the next segment comes while the consumer writes this one.
        refill();
        if (next) {
          yield next.piece;
          next.taken();
        }
      } else if (await reads.ended()) return;
    }
  } finally {
    pieces.close();
    reads.close();
  }
}

/**
 * The pieces downloads hand to the one consumer of `segmentsAsTheyCome`, in the order they came.
 * A piece given is taken when the consumer asks for the next one after it: a download waits for
 * that before it gives another, so that a slow consumer holds each download back.
 */
class Handover {
  private readonly queue: {
    piece: ResultSegmentBytes;
    taken: () => void;
    dropped: (err: Error) => void;
  }[] = [];
  private wakeUp: (() => void) | undefined;
  private failure: { err: unknown } | undefined;
  private closed = false;

  get waiting(): boolean {
    return this.queue.length > 0;
  }

  /** Resolves once the consumer has taken `piece`; rejects if the read ends first. */
  give(piece: ResultSegmentBytes): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the read of the segments ended'));
    return new Promise((taken, dropped) => {
      this.queue.push({ piece, taken, dropped });
      this.wake();
    });
  }

  /** A download failed for good: the consumer is told at its next ask. */
  fail(err: unknown): void {
    this.failure ??= { err };
    this.wake();
  }

  /** The next piece, or undefined when there is none yet (a download ended): ask again. */
  async next(): Promise<{ piece: ResultSegmentBytes; taken: () => void } | undefined> {
    if (!this.failure && this.queue.length === 0) {
      await new Promise<void>((resolve) => (this.wakeUp = resolve));
    }
    if (this.failure) throw this.failure.err;
    return this.queue.shift();
  }

  /** The read ended: pieces not taken are dropped, and their downloads stop. */
  close(): void {
    this.closed = true;
    for (const { dropped } of this.queue.splice(0)) {
      dropped(new Error('the read of the segments ended'));
    }
  }

  private wake(): void {
    const wakeUp = this.wakeUp;
    this.wakeUp = undefined;
    wakeUp?.();
  }
}

/**
 * One read of a result's segments: the manifest as it stands (a refresh replaces it), the
 * downloads started from it, and the read's end, which stops the downloads still under way (a
 * failure, or the consumer stopped early).
 */
class SegmentDownloads {
  manifest: ResultManifest;
  private readonly stop = new AbortController();
  private readonly onAbort = () => this.stop.abort();
  /** How long to wait before asking again for the segments of a query that still runs. */
  private wait = POLL_MS.first;

  constructor(
    first: ResultManifest,
    private readonly source: SegmentSource,
  ) {
    this.manifest = first;
    source.signal?.addEventListener('abort', this.onAbort);
  }

  /**
   * Starts segment `index`'s download, its bytes handed over in pieces as they come (see segment);
   * a failure before it is awaited is not unhandled.
   */
  start(index: number, handing: Handing): Promise<void> {
    const download = segment(index, {
      manifest: () => this.manifest,
      refresh: async () => {
        this.manifest = await this.source.refresh();
      },
      source: this.source,
      signal: this.stop.signal,
      ...handing,
    });
    download.catch(() => undefined);
    return download;
  }

  /** A segment was given out: the next wait for new ones starts short again. */
  gave(): void {
    this.wait = POLL_MS.first;
  }

  /**
   * With every segment of the manifest read: true when the result is complete (its segments
   * checked to cover it); else false, once a fresh manifest was asked for after a wait.
   */
  async ended(): Promise<boolean> {
    if (this.manifest.complete) {
      checkCovered(this.manifest, this.source.queryId);
      return true;
    }
    await sleep(this.wait, this.source.signal);
    this.wait = Math.min(this.wait * 2, POLL_MS.most);
    this.manifest = await this.source.refresh();
    return false;
  }

  close(): void {
    this.source.signal?.removeEventListener('abort', this.onAbort);
    this.stop.abort();
  }
}

/** A complete manifest's segments must end where the result does: never a short result. */
function checkCovered(manifest: ResultManifest, queryId: string): void {
  const end = manifest.segments.at(-1);
  const size = end ? end.offset + end.size : 0;
  if (size !== manifest.size) {
    throw new SluiceClientError(
      `the result's segments hold ${size} bytes, its manifest says ${manifest.size}`,
      { kind: 'protocol', queryId },
    );
  }
}

/**
 * Hands a piece of a segment over, resolving once it is taken; `last`: the segment's final piece,
 * given once its bytes were checked against its size.
 */
type Hand = (piece: ResultSegmentBytes, last: boolean) => Promise<void>;

/**
 * How a download hands its bytes over: `hand`, and whether a segment read again from its start
 * (it was not the size listed) is handed over again from there (`again`: a writer at offsets
 * writes over what it had) or fails once pieces of it were handed over (an in-order reader has
 * yielded them).
 */
interface Handing {
  hand: Hand;
  again: boolean;
}

/**
 * One segment's bytes, checked against its size, handed over as they come, in pieces of
 * PIECE_BYTES or more (the last one when the segment's size is checked), each once the one before
 * it was taken: the download holds no more than two pieces at once. A piece never reaches past the
 * segment's end; a segment read again from its start is handed over again from there, or fails
 * (see Handing).
 */
async function segment(
  index: number,
  {
    manifest,
    refresh,
    source,
    signal,
    hand,
    again,
  }: {
    /** The manifest as it stands now (a refresh replaces it). */
    manifest: () => ResultManifest;
    /** Asks for a fresh manifest (new presigned URLs). */
    refresh: () => Promise<void>;
    source: SegmentSource;
    signal: AbortSignal;
  } & Handing,
): Promise<void> {
  const { offset, size } = manifest().segments[index];
  const parts: Uint8Array[] = [];
  let received = 0;
  /** Where `parts` start in the result, and how many bytes they hold. */
  let partsAt = offset;
  let gathered = 0;
  /** The piece handed over last, until it is taken. */
  let handed: Promise<void> | undefined;
  let why = '';
  for (let attempt = 0; attempt < source.attempts; attempt++) {
    if (attempt > 0 && why.startsWith('HTTP 403')) {
      // A presigned URL past its time: the manifest gives fresh ones.
      await refresh();
    }
    const url = manifest().segments[index]?.url;
    if (!url) break;
    // A store that takes the connection and then sends nothing would otherwise hold the
    // download for ever: this try ends after idleMs without a byte.
    const idle = new IdleLimit(signal, source.idleMs);
    try {
      let res: Response;
      try {
        res = await source.fetch(url, {
          signal: idle.signal,
          headers: received > 0 ? { range: `bytes=${received}-` } : {},
        });
      } catch (cause) {
        if (signal.aborted) throw cause;
        why = idle.expired ? idle.why(received) : ((cause as Error)?.message ?? String(cause));
        continue;
      }
      if (res.status !== (received > 0 ? 206 : 200)) {
        why = `HTTP ${res.status} ${res.statusText}`.trim();
        await res.body?.cancel().catch(() => undefined);
        continue;
      }
      const reader = res.body!.getReader();
      try {
        for (;;) {
          idle.restart();
          const { done, value } = await reader.read();
          if (done) break;
          received += value.byteLength;
          // Longer than listed: nothing of it past the segment's end is handed over.
          if (received > size) break;
          parts.push(value);
          gathered += value.byteLength;
          // At the segment's end, the last piece takes them, once its size is checked.
          if (gathered >= PIECE_BYTES && received < size) {
            // The store's silence is not timed while the consumer takes the piece before.
            idle.pause();
            await handed;
            handed = hand({ offset: partsAt, parts: parts.splice(0) }, false);
            // Awaited before the next piece; dropped meanwhile (the read ended while this
            // download reads on), it must not count as unhandled.
            handed.catch(() => undefined);
            partsAt += gathered;
            gathered = 0;
          }
        }
      } catch (cause) {
        if (signal.aborted) throw cause;
        // Cut or stalled: the next try asks for the rest.
        why = idle.expired ? idle.why(received) : `connection broke after ${received} bytes`;
        continue;
      }
      if (received > size) await reader.cancel().catch(() => undefined);
    } finally {
      idle.end();
    }
    if (received === size) {
      await handed;
      // Not awaited: the download ends as its last piece is handed over (see segmentsAsTheyCome).
      hand({ offset: partsAt, parts }, true).catch(() => undefined);
      return;
    }
    why =
      received > size
        ? `more than the ${size} bytes the manifest says`
        : `${received} bytes read, the manifest says ${size}`;
    if (partsAt > offset && !again) {
      throw new SluiceClientError(
        `segment ${index + 1} of the result (bytes ${offset}-${offset + size - 1}) is not what the manifest lists: ${why}, after its first ${partsAt - offset} bytes were given out`,
        { kind: 'protocol', queryId: source.queryId },
      );
    }
    // Not the segment listed: read it again, whole (handed over again from its start).
    parts.length = 0;
    received = 0;
    partsAt = offset;
    gathered = 0;
  }
  throw new SluiceClientError(
    `segment ${index + 1} of the result (bytes ${offset}-${offset + size - 1}) could not be downloaded from the store: ${why || 'it has no URL'}`,
    { kind: 'connection', queryId: source.queryId },
  );
}

/**
 * One try's limit on silence: its `signal` aborts when the read's does, or when `ms` pass with no
 * `restart()` (a byte came) in between.
 */
class IdleLimit {
  private readonly controller = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly onStop = () => this.controller.abort();
  expired = false;

  constructor(
    private readonly read: AbortSignal,
    private readonly ms: number,
  ) {
    read.addEventListener('abort', this.onStop, { once: true });
    this.restart();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Stops timing until the next restart(). */
  pause(): void {
    clearTimeout(this.timer);
  }

  restart(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.expired = true;
      this.controller.abort();
    }, this.ms);
  }

  why(received: number): string {
    return `the store sent nothing for ${this.ms / 1000} s after ${received} bytes`;
  }

  end(): void {
    clearTimeout(this.timer);
    this.read.removeEventListener('abort', this.onStop);
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new Error('aborted'));
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(new Error('aborted'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
