import type { Readable } from 'node:stream';

/** The kinds of store a spool writes to (SLUICE_SPOOL_URL's scheme). */
export type SpoolKind = 'file' | 's3';

/** One segment of the spool, as a listing gives it (the sweep's view). */
export interface SpoolEntry {
  /** Its key, as put (without the store's own prefix or directory). */
  key: string;
  size: number;
  /** When it was written (epoch ms). */
  modifiedAt: number;
}

/**
 * Thrown by `read` when the segment is not in the store (deleted, or lost), and by its readers
 * when it is there at another size than it was written: its bytes are lost either way.
 */
export class SpoolMissingError extends Error {
  constructor(
    readonly key: string,
    why = 'is missing from the store',
  ) {
    super(`spooled segment ${key} ${why}`);
    this.name = 'SpoolMissingError';
  }
}

/** Thrown when the store cannot be reached or refuses an operation. */
export class SpoolUnavailableError extends Error {
  constructor(operation: string, cause: unknown) {
    super(
      `the result store failed to ${operation}: ${(cause as Error)?.message ?? String(cause)}`,
      {
        cause,
      },
    );
    this.name = 'SpoolUnavailableError';
  }
}

/**
 * Where kept results' bodies are written, in segments: a directory or an S3-compatible bucket
 * (SLUICE_SPOOL_URL). A segment is written once, whole, and never changed; keys are
 * `<query id>/<name>`, so that one query's segments are listed and deleted together.
 */
export interface ResultSpool {
  readonly kind: SpoolKind;
  /** Stores one segment, its parts in order; they are reused once the returned promise settles. */
  put(key: string, parts: Buffer[]): Promise<void>;
  /** The segment's bytes from `start` on (default 0); SpoolMissingError when it is not there. */
  read(key: string, start?: number): Promise<Readable>;
  /** Deletes segments; one that is not there is no error. */
  remove(keys: string[]): Promise<void>;
  /** The segments whose key starts with `prefix` (all of them without one), a page at a time. */
  list(prefix?: string): AsyncIterable<SpoolEntry>;
  /**
   * A URL that reads the segment with no other credential for `seconds`; undefined from a store
   * that has none (a directory).
   */
  presign(key: string, seconds: number): Promise<string | undefined>;
  /** Resolves when the store can be written now; SpoolUnavailableError otherwise, within `timeoutMs`. */
  check(timeoutMs: number): Promise<void>;
  close(): void;
}

/** A query's segment keys begin with this. */
export function segmentPrefix(queryId: string): string {
  return `${queryId}/`;
}

/**
 * A segment's key as Sluice makes it: `<query id>/<run>.<number>` (SpoolingResultWriter), or the
 * temporary name a file spool writes one under first.
 */
const SEGMENT_KEY =
  /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\/[0-9a-f]{8}\.\d{6,}(\.tmp-[0-9a-f]{8})?$/;

/** The query a segment key belongs to; undefined for a key Sluice never makes (not its own). */
export function queryOfSegment(key: string): string | undefined {
  return SEGMENT_KEY.exec(key)?.[1];
}

/** Deletes every segment of one query (a DELETE, a failed result, a swept one). */
export async function removeQuery(spool: ResultSpool, queryId: string): Promise<number> {
  const keys: string[] = [];
  for await (const entry of spool.list(segmentPrefix(queryId))) keys.push(entry.key);
  await spool.remove(keys);
  return keys.length;
}

/**
 * Stands in for the spool in a process that has none (no SLUICE_SPOOL_URL) but was handed a
 * spooled job: every operation fails, saying which setting is missing.
 */
export class UnconfiguredSpool implements ResultSpool {
  readonly kind = 'file' as const;
  private readonly missing = new SpoolUnavailableError(
    'be reached',
    new Error('this process has no SLUICE_SPOOL_URL, and the query was queued to be spooled'),
  );

  put(): Promise<void> {
    return Promise.reject(this.missing);
  }
  read(): Promise<never> {
    return Promise.reject(this.missing);
  }
  remove(): Promise<void> {
    return Promise.reject(this.missing);
  }
  list(): AsyncIterable<SpoolEntry> {
    const missing = this.missing;
    return {
      [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(missing) }),
    };
  }
  presign(): Promise<string | undefined> {
    return Promise.resolve(undefined);
  }
  check(): Promise<void> {
    return Promise.reject(this.missing);
  }
  close(): void {
    // Nothing held.
  }
}
