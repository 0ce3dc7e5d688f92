import { Status } from '@app/contracts';
import { JsonRowWriter } from './json-row.writer';
import { EncoderOptions, ResultEncoder } from './result.encoder';
import { RowBatch } from './row.batch';
import { Utf8Builder } from './utf8.builder';

/**
 * application/stream+json: one JSON object per line — `{"query_id","schema"}`, then one
 * `{"data":[…]}` per chunk, then `{"status":{…}}`. A body without the status line is incomplete.
 */
export class NdjsonEncoder implements ResultEncoder {
  private readonly writer: JsonRowWriter;
  private readonly out = new Utf8Builder();

  constructor(private readonly options: EncoderOptions) {
    this.writer = new JsonRowWriter(options.columns, options.layout);
  }

  head(): Buffer {
    const { queryId, columns } = this.options;
    const schema = JSON.stringify(columns.map(({ name, type }) => ({ name, type })));
    return Buffer.from(`{"query_id":${JSON.stringify(queryId)},"schema":${schema}}\n`);
  }

  rows(rows: RowBatch, chunkRows = rows.length): Buffer {
    if (rows.length === 0) return Buffer.alloc(0);
    // One line a chunk, all of them built in one buffer.
    for (let from = 0; from < rows.length; from += chunkRows) {
      this.out.append('{"data":[');
      this.writer.write(this.out, rows.slice(from, from + chunkRows), { leadingComma: false });
      this.out.append(']}\n');
    }
    return this.out.take();
  }

  end(status: Status): Buffer {
    return Buffer.from(`{"status":${JSON.stringify(status)}}\n`);
  }

  reuse(chunk: Buffer): void {
    this.out.reuse(chunk);
  }
}
