import { Status } from '@app/contracts';
import { JsonRowWriter } from './json-row.writer';
import { EncoderOptions, ResultEncoder } from './result.encoder';
import { RowBatch } from './row.batch';
import { Utf8Builder } from './utf8.builder';

/** application/json: one document, `status` last so that a late failure is still reported. */
export class JsonEncoder implements ResultEncoder {
  private readonly writer: JsonRowWriter;
  private readonly out = new Utf8Builder();
  private first = true;

  constructor(private readonly options: EncoderOptions) {
    this.writer = new JsonRowWriter(options.columns, options.layout);
  }

  head(): Buffer {
    const { queryId, layout, columns } = this.options;
    const schema =
      layout === 'array'
        ? `"schema":${JSON.stringify(columns.map(({ name, type }) => ({ name, type })))},`
        : '';
    return Buffer.from(`{"query_id":${JSON.stringify(queryId)},${schema}"data":[`);
  }

  rows(rows: RowBatch): Buffer {
    this.writer.write(this.out, rows, { leadingComma: !this.first });
    if (rows.length > 0) this.first = false;
    return this.out.take();
  }

  end(status: Status): Buffer {
    return Buffer.from(`],"status":${JSON.stringify(status)}}`);
  }

  reuse(chunk: Buffer): void {
    this.out.reuse(chunk);
  }
}
