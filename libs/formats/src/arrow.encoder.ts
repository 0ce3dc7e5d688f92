import { Status } from '@app/contracts';
import { Data, RecordBatch, RecordBatchStreamWriter, Schema, Struct, makeData } from 'apache-arrow';
import type { ArrayBufferViewInput } from 'apache-arrow/util/buffer';
import { ArrowColumnBuilder } from './arrow-column.builder';
import { pgArrayDelimiter, pgColumnKind } from './pg-text.decoder';
import { EncoderOptions, ResultEncoder, TextRow } from './result.encoder';

/**
 * apache-arrow's stream writer, with its output taken synchronously message by message instead of
 * through its async byte queue.
 */
class MessageWriter extends RecordBatchStreamWriter {
  private parts: Uint8Array[] = [];
  private size = 0;

  protected override _write(chunk: ArrayBufferViewInput): this {
    if (!this._started) return this;
    // The writer hands over typed arrays: message headers, padding, body buffers.
    if (!ArrayBuffer.isView(chunk)) throw new Error('unexpected chunk from the Arrow writer');
    if (chunk.byteLength > 0) {
      this.parts.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
      this.size += chunk.byteLength;
      this._position += chunk.byteLength;
    }
    return this;
  }

  take(): Buffer {
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
 * in the stream: `end(…, true)` is null.
 */
export class ArrowEncoder implements ResultEncoder {
  private readonly builders: ArrowColumnBuilder[];
  private readonly schema: Schema;
  private readonly struct: Struct;
  private readonly writer = new MessageWriter({ autoDestroy: false });

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
    this.writer.reset(undefined, this.schema);
    return this.writer.take();
  }

  rows(rows: TextRow[]): Buffer {
    if (rows.length === 0) return Buffer.alloc(0);
    const children: Data[] = this.builders.map((b, c) => b.build(rows.map((r) => r[c])));
    const struct = makeData({
      type: this.struct,
      length: rows.length,
      nullCount: 0,
      children,
    });
    this.writer.write(new RecordBatch(this.schema, struct));
    return this.writer.take();
  }

  end(_status: Status, failed: boolean): Buffer | null {
    return failed ? null : Buffer.from(END_OF_STREAM);
  }
}
