import { Status, isFailure } from '@app/contracts';
import {
  AsyncByteQueue,
  Data,
  RecordBatch,
  RecordBatchStreamWriter,
  Schema,
  Struct,
  makeData,
} from 'apache-arrow';
import { ArrowColumnBuilder } from './arrow-column.builder';
import { pgArrayDelimiter, pgColumnKind } from './pg-text.decoder';
import { EncoderOptions, ResultEncoder, eachChunk } from './result.encoder';
import { RowBatch } from './row.batch';

/**
 * The sink of apache-arrow's stream writer (`reset(sink)` takes an AsyncByteQueue as its own),
 * kept as a plain list: the writer's output is taken synchronously message by message instead of
 * through the queue's async iterator.
 */
class MessageSink extends AsyncByteQueue {
  private parts: Uint8Array[] = [];
  private size = 0;

  override write(chunk: Parameters<AsyncByteQueue['write']>[0]): void {
    // The writer hands over typed arrays: message headers, padding, body buffers.
    if (!ArrayBuffer.isView(chunk)) throw new Error('unexpected chunk from the Arrow writer');
    if (chunk.byteLength === 0) return;
    this.parts.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    this.size += chunk.byteLength;
  }

  /** What the writer wrote since the last take; at least one byte, or the writer has changed. */
  take(): Buffer {
    if (this.size === 0) throw new Error('the Arrow writer wrote nothing synchronously');
    const out = Buffer.concat(this.parts, this.size);
    this.parts = [];
    this.size = 0;
    return out;
  }
}

// End-of-stream marker: continuation token and a zero length.
const END_OF_STREAM = Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);

/**
 * application/vnd.apache.arrow.stream: the Arrow IPC stream format — `head` is the schema message,
 * each non-empty chunk one record batch, `end` the end-of-stream marker. A failure cannot be told
 * in the stream: `end()` of a failure (isFailure) is null.
 */
export class ArrowEncoder implements ResultEncoder {
  private readonly builders: ArrowColumnBuilder[];
  private readonly schema: Schema;
  private readonly struct: Struct;
  private readonly sink = new MessageSink();
  private readonly writer = new RecordBatchStreamWriter({ autoDestroy: false });

  constructor(options: EncoderOptions) {
    this.builders = options.columns.map(
      (c) =>
        new ArrowColumnBuilder(
          c.name,
          pgColumnKind(c.oid, c.type, c.objectJson),
          pgArrayDelimiter(c.oid),
        ),
    );
    this.schema = new Schema(this.builders.map((b) => b.field));
    this.struct = new Struct(this.schema.fields);
  }

  head(): Buffer {
    this.writer.reset(this.sink, this.schema);
    return this.sink.take();
  }

  rows(batch: RowBatch, chunkRows = batch.length): Buffer {
    // A record batch a chunk.
    return eachChunk(batch, Math.max(1, chunkRows), (chunk) => this.chunk(chunk));
  }

  private chunk(batch: RowBatch): Buffer {
    const rows = batch.text();
    if (rows.length === 0) return Buffer.alloc(0);
    const children: Data[] = this.builders.map((b, c) => b.build(rows.map((r) => r[c])));
    const struct = makeData({
      type: this.struct,
      length: rows.length,
      nullCount: 0,
      children,
    });
    this.writer.write(new RecordBatch(this.schema, struct));
    return this.sink.take();
  }

  end(status: Status): Buffer | null {
    return isFailure(status) ? null : Buffer.from(END_OF_STREAM);
  }
}
