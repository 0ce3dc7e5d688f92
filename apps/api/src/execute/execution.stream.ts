import { Logger } from '@nestjs/common';
import { Readable } from 'node:stream';
import { ResultRecord, Status, statusOf } from '@app/contracts';
import { ReaderClosedError, ResultReader } from '@app/transport';
import { ExecutionTracker } from './execution.tracker';

/**
 * The bytes that end a body in-band with a failure status, given the last bytes sent; null when
 * the body cannot carry one there (it is then aborted, so no client takes it for a whole one).
 */
export type LateFailureTail = (status: Status, lastSent: Buffer) => Buffer | null;

const logger = new Logger('ExecutionStream');

/**
 * One query's response body and everything it holds: the result reader and the registry
 * tracker. `close()` is the one way out, idempotent: the body calls it when it ends, and the
 * response's close event calls it however the response ends — before the body's first read
 * (when its generator never runs), while it waits for a record, or after the last one.
 */
export class ExecutionStream {
  readonly body: Readable;
  private finished = false;
  private closing: Promise<void> | undefined;

  constructor(
    readonly queryId: string,
    readAhead: ResultRecord[],
    private readonly reader: ResultReader,
    private readonly tracker: ExecutionTracker,
    private readonly lateFailure: LateFailureTail,
  ) {
    this.body = Readable.from(this.records(readAhead), { objectMode: false });
  }

  close(): Promise<void> {
    this.closing ??= this.release();
    return this.closing;
  }

  private async release(): Promise<void> {
    if (!this.finished) {
      // The response ended before the result did: the client went away. Stop the producer.
      this.finished = true;
      await this.reader.cancel().catch((err: Error) =>
        // Repaired by close() below: the worker also stops once the reader's alive key is gone.
        logger.warn(`query ${this.queryId}: could not send its cancel: ${err.message}`),
      );
      await this.tracker.end(statusOf('CANCELLED', 'client went away'));
    }
    await this.reader.close().catch((err: Error) =>
      // Repaired by Redis: the alive key lapses within seconds, the stream at its TTL.
      logger.warn(`query ${this.queryId}: could not release its result reader: ${err.message}`),
    );
  }

  /**
   * Yields the body bytes record by record, starting with `readAhead` (the records read before
   * the response was committed to); a failure the format cannot carry aborts it.
   */
  private async *records(readAhead: ResultRecord[]): AsyncGenerator<Buffer> {
    const pending = [...readAhead];
    let lastSent: Buffer = Buffer.alloc(0);
    try {
      for (;;) {
        const record = pending.shift() ?? (await this.reader.next());
        this.tracker.sent(record);
        switch (record.kind) {
          case 'head':
          case 'data':
            if (record.bytes.length > 0) {
              lastSent = record.bytes;
              yield record.bytes;
            }
            break;
          case 'end':
            this.finished = true;
            await this.tracker.end(record.status);
            if (record.abort) throw new Error(`query failed mid-stream: ${record.status.reason}`);
            if (record.bytes.length > 0) yield record.bytes;
            return;
          case 'error': {
            // Found by the api itself after the body started (the worker was lost): a worker
            // never writes `error` once it has sent a byte.
            this.finished = true;
            await this.tracker.end(record.status);
            const tail = this.lateFailure(record.status, lastSent);
            if (!tail) throw new Error(`query failed mid-stream: ${record.status.reason}`);
            yield tail;
            return;
          }
        }
      }
    } catch (err) {
      // Closed by close(): the response is gone, nobody is left to tell. Closed by anything else
      // (the source shutting down), the body must not end as if it were whole: it is aborted.
      if (err instanceof ReaderClosedError && this.closing) return;
      throw err;
    } finally {
      await this.close();
    }
  }
}
