import { ResultFormat } from '@app/contracts';
import { negotiateFormat } from './media.negotiator';

const ALL: ResultFormat[] = ['json', 'ndjson', 'csv', 'parquet', 'arrow'];

describe('negotiateFormat', () => {
  it.each([
    [undefined, 'json'],
    ['*/*', 'json'],
    ['application/x-ndjson', 'ndjson'],
    ['text/csv;q=0.5, application/parquet; compression=gzip', 'parquet'],
    ['image/png', undefined],
  ])('answers %s with %s, the second time as the first', (accept, format) => {
    expect(negotiateFormat(accept, ALL)).toBe(format);
    expect(negotiateFormat(accept, ALL)).toBe(format);
  });

  it('answers a header by the formats on offer, not by what it chose among others', () => {
    expect(negotiateFormat('text/csv, */*;q=0.1', ALL)).toBe('csv');
    expect(negotiateFormat('text/csv, */*;q=0.1', ['json'])).toBe('json');
  });

  it('still answers each header right once it has seen more than it remembers', () => {
    for (let i = 0; i < 600; i++) {
      expect(negotiateFormat(`text/csv;q=0.${(i % 9) + 1}, application/x-${i}`, ALL)).toBe('csv');
    }
    expect(negotiateFormat('application/vnd.apache.arrow.stream', ALL)).toBe('arrow');
  });
});
