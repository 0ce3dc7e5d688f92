import { ResultRecord, okStatus } from '@app/contracts';
import { CappedResultWriter } from './capped-result.writer';
import { ProducerStoppedError, ResultWriter } from './result.channel';

/** Records what reaches the writer behind the cap. */
function recording(): ResultWriter & { written: ResultRecord[] } {
  const written: ResultRecord[] = [];
  return {
    written,
    write: (record) => Promise.resolve(void written.push(record)),
    writeFinal: (records) => Promise.resolve(void written.push(...records)),
    watch: () => () => undefined,
    interrupt: () => undefined,
  };
}

const data = (n: number): ResultRecord => ({ kind: 'data', rows: 1, bytes: Buffer.alloc(n) });

describe(CappedResultWriter.name, () => {
  it('passes records through up to the cap, then stops the producer with too-large', async () => {
    const inner = recording();
    const writer = new CappedResultWriter(inner, 100);
    await writer.write(data(60));
    await writer.write(data(40));
    await expect(writer.write(data(1))).rejects.toEqual(new ProducerStoppedError('too-large'));
    expect(inner.written).toHaveLength(2);
    // The end that reports it still goes through.
    await writer.write({ kind: 'end', status: okStatus(), bytes: Buffer.alloc(500) });
    expect(inner.written).toHaveLength(3);
  });

  it('ends a held result over the cap with its reason instead of its records', async () => {
    const inner = recording();
    const writer = new CappedResultWriter(inner, 10);
    await writer.writeFinal([
      data(20),
      { kind: 'end', status: okStatus(), bytes: Buffer.alloc(0) },
    ]);
    expect(inner.written).toEqual([
      {
        kind: 'error',
        status: expect.objectContaining({ vendor_code: -112, sql_state: '54000' }) as unknown,
      },
    ]);
  });

  it('aborts a body already started when its held end goes over the cap', async () => {
    const inner = recording();
    const writer = new CappedResultWriter(inner, 10);
    await writer.write(data(5));
    await writer.writeFinal([
      data(20),
      { kind: 'end', status: okStatus(), bytes: Buffer.alloc(0) },
    ]);
    expect(inner.written[1]).toMatchObject({
      kind: 'end',
      abort: true,
      status: { vendor_code: -112 },
    });
  });
});
