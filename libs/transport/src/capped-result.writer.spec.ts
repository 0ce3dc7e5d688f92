import { ResultRecord, okStatus, statusOf } from '@app/contracts';
import { CappedResultWriter, KeptBudget } from './capped-result.writer';
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
    endRecorded: false,
  };
}

const data = (n: number): ResultRecord => ({ kind: 'data', rows: 1, bytes: Buffer.alloc(n) });

const okEnd: ResultRecord = { kind: 'end', status: okStatus(), bytes: Buffer.alloc(0) };

/** The kept result failed as too large, its reason naming the cap it passed. */
function expectTooLarge(record: ResultRecord, cap: string): void {
  expect(record).toMatchObject({ kind: 'error', status: { vendor_code: -112 } });
  expect((record as { status: { reason: string } }).status.reason).toContain(cap);
}

describe(CappedResultWriter.name, () => {
  it('passes records through up to the cap, then stops the producer with too-large', async () => {
    const inner = recording();
    const writer = new CappedResultWriter(inner, 100);
    await writer.write(data(60));
    await writer.write(data(40));
    await expect(writer.write(data(1))).rejects.toEqual(new ProducerStoppedError('too-large'));
    expect(inner.written).toHaveLength(2);
    // The end that reports it still goes through, as the error alone.
    await writer.write({
      kind: 'end',
      status: statusOf('RESULT_TOO_LARGE'),
      bytes: Buffer.alloc(500),
    });
    expect(inner.written).toHaveLength(3);
    expect(inner.written[2]).toMatchObject({ kind: 'error', status: { vendor_code: -112 } });
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

  it('ends a body already started with the error alone when its held end goes over the cap', async () => {
    const inner = recording();
    const writer = new CappedResultWriter(inner, 10);
    await writer.write(data(5));
    await writer.writeFinal([
      data(20),
      { kind: 'end', status: okStatus(), bytes: Buffer.alloc(0) },
    ]);
    expect(inner.written).toHaveLength(2);
    expect(inner.written[1]).toMatchObject({ kind: 'error', status: { vendor_code: -112 } });
  });

  it('takes every byte from the budget before writing, and stops with kept-full when it is spent', async () => {
    const inner = recording();
    let left = 100;
    const taken: number[] = [];
    let released = 0;
    const budget: KeptBudget = {
      take: (bytes) => {
        taken.push(bytes);
        if (bytes > left) return Promise.resolve('kept-full' as const);
        left -= bytes;
        return Promise.resolve(undefined);
      },
      release: () => Promise.resolve(void (released += 1)),
    };
    const writer = new CappedResultWriter(inner, 1000, budget);
    await writer.write(data(60));
    await expect(writer.write(data(60))).rejects.toEqual(new ProducerStoppedError('kept-full'));
    expect(inner.written).toHaveLength(1);
    await writer.write({
      kind: 'end',
      status: statusOf('RESULT_TOO_LARGE'),
      bytes: Buffer.alloc(9),
    });
    expect(inner.written[1]).toMatchObject({ kind: 'error', status: { vendor_code: -112 } });
    // A failed result gives back what it took; its error took nothing.
    expect(released).toBe(1);
    expect(taken).toEqual([60, 60]);
  });

  it('fails a held end that the budget cannot take, and moves the expiry with a take of 0', async () => {
    const inner = recording();
    const taken: number[] = [];
    const budget: KeptBudget = {
      take: (bytes) =>
        Promise.resolve(taken.push(bytes) > 0 && bytes < 10 ? undefined : 'kept-full'),
      release: () => Promise.resolve(),
    };
    const writer = new CappedResultWriter(inner, 1000, budget);
    await writer.writeFinal([{ kind: 'end', status: okStatus(), bytes: Buffer.alloc(0) }]);
    expect(inner.written[0]).toMatchObject({ kind: 'end' });
    await writer.writeFinal([data(20), okEnd]);
    expectTooLarge(inner.written[1], 'SLUICE_RESULT_TOTAL_MAX_BYTES');
    expect(taken).toEqual([0, 20]);
  });

  it("stops with the budget's own reason when its owner's share is spent", async () => {
    const inner = recording();
    const budget: KeptBudget = {
      take: (bytes) => Promise.resolve(bytes > 50 ? 'kept-user-full' : undefined),
      release: () => Promise.resolve(),
    };
    const writer = new CappedResultWriter(inner, 1000, budget);
    await expect(writer.write(data(60))).rejects.toEqual(
      new ProducerStoppedError('kept-user-full'),
    );
    await writer.writeFinal([data(60), okEnd]);
    expectTooLarge(inner.written[0], 'SLUICE_RESULT_USER_MAX_BYTES');
  });
});
