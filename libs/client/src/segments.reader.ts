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
 */
export async function* segmentBytes(
  first: ResultManifest,
  source: SegmentSource,
): AsyncGenerator<Uint8Array> {
  const reads = new SegmentDownloads(first, source);
  const downloads = new Map<number, Promise<Uint8Array[]>>();
  let started = 0;
  let next = 0;
  // Only segments within `parallel` of the next one out: what waits its turn is bounded.
  const refill = () => {
    while (started < reads.manifest.segments.length && started < next + source.parallel) {
      const index = started++;
      downloads.set(index, reads.start(index));
    }
  };
  try {
    for (;;) {
      refill();
      if (next < reads.manifest.segments.length) {
        const parts = await downloads.get(next)!;
        downloads.delete(next++);
        reads.gave();
        // The next download starts now, while this segment's bytes are taken.
        refill();
        // As they came: joining a segment's parts would copy every byte once more.
        for (const part of parts) yield part;
      } else if (await reads.ended()) return;
    }
  } finally {
    reads.close();
  }
}

/**
 * The segments of a spooled kept result as `segmentBytes` reads them (`parallel` downloads at
 * once, the same retries, fresh URLs and size checks, the manifest asked again while the query
 * runs), each yielded whole with its offset as soon as its download ends, in whatever order they
 * end: for a writer that can put bytes at an offset (a file), which then never holds a segment
 * back for an earlier one still on its way. Together they are the result's bytes: the iteration
 * ends only once the manifest says the result is complete and its segments cover its size.
 */
export async function* segmentsAsTheyCome(
  first: ResultManifest,
  source: SegmentSource,
): AsyncGenerator<ResultSegmentBytes> {
  const reads = new SegmentDownloads(first, source);
  const downloads = new Map<number, Promise<{ index: number; segment: ResultSegmentBytes }>>();
  let started = 0;
  const refill = () => {
    while (started < reads.manifest.segments.length && downloads.size < source.parallel) {
      const index = started++;
      const { offset } = reads.manifest.segments[index];
      const done = reads.start(index).then((parts) => ({ index, segment: { offset, parts } }));
      // Raced below; a failure before then must not count as unhandled meanwhile.
      done.catch(() => undefined);
      downloads.set(index, done);
    }
  };
  try {
    for (;;) {
      refill();
      if (downloads.size > 0) {
        const { index, segment: done } = await Promise.race(downloads.values());
        downloads.delete(index);
        reads.gave();
        // The next download starts before this segment is handed over: it comes while the
        // consumer writes this one (one at a time, download and write no longer take turns).
        refill();
        yield done;
      } else if (await reads.ended()) return;
    }
  } finally {
    reads.close();
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

  /** Starts segment `index`'s download; a failure before it is awaited is not unhandled. */
  start(index: number): Promise<Uint8Array[]> {
    const download = segment(index, {
      manifest: () => this.manifest,
      refresh: async () => {
        this.manifest = await this.source.refresh();
      },
      source: this.source,
      signal: this.stop.signal,
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

/** One segment's bytes, whole (in the parts they came in), checked against its size. */
async function segment(
  index: number,
  {
    manifest,
    refresh,
    source,
    signal,
  }: {
    /** The manifest as it stands now (a refresh replaces it). */
    manifest: () => ResultManifest;
    /** Asks for a fresh manifest (new presigned URLs). */
    refresh: () => Promise<void>;
    source: SegmentSource;
    signal: AbortSignal;
  },
): Promise<Uint8Array[]> {
  const { offset, size } = manifest().segments[index];
  const parts: Uint8Array[] = [];
  let received = 0;
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
      try {
        const reader = res.body!.getReader();
        for (;;) {
          idle.restart();
          const { done, value } = await reader.read();
          if (done) break;
          parts.push(value);
          received += value.byteLength;
        }
      } catch (cause) {
        if (signal.aborted) throw cause;
        // Cut or stalled: the next try asks for the rest.
        why = idle.expired ? idle.why(received) : `connection broke after ${received} bytes`;
        continue;
      }
    } finally {
      idle.end();
    }
    if (received === size) return parts;
    why = `${received} bytes read, the manifest says ${size}`;
    // Not the segment listed: read it again, whole.
    parts.length = 0;
    received = 0;
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
