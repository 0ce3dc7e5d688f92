import { Status } from '@app/contracts';
import { ResultEncoder } from './result.encoder';
import { RowBatch } from './row.batch';

const EMPTY: Buffer = Buffer.alloc(0);

/**
 * Holds an encoder's opening bytes back until its first real output. For formats that cannot
 * report a failure in-band (CSV, Parquet, Arrow), a statement that fails before any row is sent
 * is then still answered with the error envelope and its own HTTP status, not a cut connection.
 */
export class DeferredHeadEncoder implements ResultEncoder {
  private pending: Buffer | undefined;

  constructor(private readonly inner: ResultEncoder) {}

  head(): Buffer {
    this.pending = this.inner.head();
    return EMPTY;
  }

  rows(rows: RowBatch, chunkRows?: number): Buffer {
    return this.withHead(this.inner.rows(rows, chunkRows));
  }

  end(status: Status): Buffer | null {
    const tail = this.inner.end(status);
    return tail === null ? null : this.withHead(tail);
  }

  private withHead(bytes: Buffer): Buffer {
    if (this.pending === undefined || bytes.length === 0) return bytes;
    const head = this.pending;
    this.pending = undefined;
    return Buffer.concat([head, bytes]);
  }
}
