import type { Readable } from 'node:stream';
import { ResultRecord } from '@app/contracts';
import { ReaderClosedError, ResultReader, ResultSource } from '../result.channel';
import { ResultSpool, SpoolMissingError, removeQuery } from './result.spool';

const EMPTY = Buffer.alloc(0);

/**
 * Reads a kept result whose body is in the spool as if its bytes were in its records: each record
 * that names a segment becomes the segment's bytes, read from the store as they come (a `data`
 * record per piece the store hands over), never a whole segment in memory. From `start` on when
 * asked: segments wholly before it are not read at all, the one it falls in from its offset.
 * A segment missing from the store, or held there at another size than it was written, fails
 * `next()` (SpoolMissingError): never a body short of bytes, or with bytes of something else.
 */
export class SpooledResultReader implements ResultReader {
  private pieces: AsyncIterator<Buffer> | undefined;
  private stream: Readable | undefined;
  /** Rows of the segment being read, told with its first piece. */
  private rows = 0;
  /** The segment being read: its key, and the bytes still to come from it. */
  private segment: { key: string; left: number } | undefined;
  /** Body bytes passed so far (records' own and segments'). */
  private at = 0;

  constructor(
    private readonly inner: ResultReader,
    private readonly spool: ResultSpool | undefined,
    private readonly start = 0,
  ) {}

  private closed = false;

  async next(): Promise<ResultRecord> {
    try {
      return await this.read();
    } catch (err) {
      // A segment's stream destroyed by close() fails its read: the reader was closed, nothing lost.
      if (this.closed) throw new ReaderClosedError();
      throw err;
    }
  }

  private async read(): Promise<ResultRecord> {
    for (;;) {
      if (this.pieces) {
        const piece = await this.pieces.next();
        const segment = this.segment!;
        if (!piece.done) {
          // Longer than written: not one byte past its end is given out.
          if (piece.value.length > segment.left) {
            throw new SpoolMissingError(segment.key, 'is longer in the store than it was written');
          }
          segment.left -= piece.value.length;
          const rows = this.rows;
          this.rows = 0;
          return { kind: 'data', rows, bytes: piece.value };
        }
        // The store held it at another size than was written: its bytes cannot be the result's.
        if (segment.left !== 0) {
          throw new SpoolMissingError(segment.key, 'is shorter in the store than it was written');
        }
        this.pieces = undefined;
        this.stream = undefined;
        continue;
      }
      const record = await this.inner.next();
      if (record.kind === 'error') return record;
      if (record.kind === 'data' && record.segment) {
        const { key, offset, size } = record.segment;
        this.at = offset + size;
        if (this.at <= this.start) continue;
        if (!this.spool)
          throw new Error(`query result names segment ${key}, and there is no spool`);
        const from = Math.max(0, this.start - offset);
        this.stream = await this.spool.read(key, from);
        this.segment = { key, left: size - from };
        this.pieces = (this.stream as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
        this.rows = record.rows;
        continue;
      }
      // Bytes of its own (a result kept before spooling, or a record written without a segment).
      const from = this.at;
      this.at += record.bytes.length;
      if (from >= this.start) return record;
      const skip = Math.min(record.bytes.length, this.start - from);
      const bytes = skip >= record.bytes.length ? EMPTY : record.bytes.subarray(skip);
      if (record.kind === 'end' || bytes.length > 0) return { ...record, bytes };
    }
  }

  cancel(): Promise<void> {
    return this.inner.cancel();
  }

  close(): Promise<void> {
    this.closed = true;
    this.stream?.destroy();
    this.stream = undefined;
    this.pieces = undefined;
    return this.inner.close();
  }
}

/**
 * `source` whose kept readers read spooled bodies from `spool` (SpooledResultReader), for those
 * who read a kept result from its start as any other (an execute that waits for its result).
 */
export function readingSpool(source: ResultSource, spool: ResultSpool | null): ResultSource {
  if (!spool) return source;
  return {
    open: (queryId, hooks) => source.open(queryId, hooks),
    openKept: (queryId, hooks) => new SpooledResultReader(source.openKept(queryId, hooks), spool),
    keptRecords: (queryId) => source.keptRecords(queryId),
    kept: (queryId) => source.kept(queryId),
    dropKept: (queryId) => source.dropKept(queryId),
    keptBytes: () => source.keptBytes(),
    cancel: (queryId) => source.cancel(queryId),
    close: () => source.close(),
  };
}

/**
 * `source` whose dropKept also deletes the result's segments from `spool` (DELETE, a user
 * deleted, a result that failed). A store that refuses leaves them to the sweep, by age.
 */
export function droppingSpooled(source: ResultSource, spool: ResultSpool | null): ResultSource {
  if (!spool) return source;
  return {
    open: (queryId, hooks) => source.open(queryId, hooks),
    openKept: (queryId, hooks) => source.openKept(queryId, hooks),
    keptRecords: (queryId) => source.keptRecords(queryId),
    kept: (queryId) => source.kept(queryId),
    dropKept: async (queryId) => {
      await source.dropKept(queryId);
      // The result is gone from its channel already: its segments can wait for the sweep.
      await removeQuery(spool, queryId).catch(() => undefined);
    },
    keptBytes: () => source.keptBytes(),
    cancel: (queryId) => source.cancel(queryId),
    close: () => source.close(),
  };
}
