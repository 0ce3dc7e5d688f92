import { rangeStart } from './kept-result.service';

describe(rangeStart.name, () => {
  it('reads bytes=N- and nothing else', () => {
    expect(rangeStart('bytes=0-')).toBe(0);
    expect(rangeStart(' bytes=1234- ')).toBe(1234);
    for (const other of [
      undefined,
      '',
      'bytes=1-2',
      'bytes=-5',
      'bytes=1-,5-',
      'items=1-',
      'bytes=x-',
    ]) {
      expect(rangeStart(other)).toBeUndefined();
    }
  });
});
