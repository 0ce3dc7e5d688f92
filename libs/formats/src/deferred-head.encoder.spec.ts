import { isFailure, okStatus, statusOf } from '@app/contracts';
import { DeferredHeadEncoder } from './deferred-head.encoder';
import { ResultEncoder } from './result.encoder';
import { RowBatch } from './row.batch';

const inner: ResultEncoder = {
  head: () => Buffer.from('H'),
  rows: (rows) => Buffer.from(rows.length > 0 ? `R${rows.length}` : ''),
  end: (status) => (isFailure(status) ? null : Buffer.from('E')),
};

describe(DeferredHeadEncoder.name, () => {
  it('sends the opening bytes with the first real output', () => {
    const encoder = new DeferredHeadEncoder(inner);
    expect(encoder.head().length).toBe(0);
    expect(encoder.rows(RowBatch.EMPTY).toString()).toBe('');
    expect(encoder.rows(RowBatch.fromText([['1']])).toString()).toBe('HR1');
    expect(encoder.rows(RowBatch.fromText([['2'], ['3']])).toString()).toBe('R2');
    expect(encoder.end(okStatus())?.toString()).toBe('E');
  });

  it('opens the body at the end when there were no rows', () => {
    const encoder = new DeferredHeadEncoder(inner);
    encoder.head();
    expect(encoder.end(okStatus())?.toString()).toBe('HE');
  });

  it('sends nothing at all for a failure before the first rows', () => {
    const encoder = new DeferredHeadEncoder(inner);
    encoder.head();
    expect(encoder.rows(RowBatch.EMPTY).length).toBe(0);
    expect(encoder.end(statusOf('INTERNAL'))).toBeNull();
  });
});
