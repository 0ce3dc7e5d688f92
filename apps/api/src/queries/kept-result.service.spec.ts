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

  it('reads a start past 2^53 as past every body (416), not as no Range at all', () => {
    expect(rangeStart('bytes=9007199254740991-')).toBe(9007199254740991);
    for (const huge of [
      'bytes=9007199254740992-',
      'bytes=9999999999999999-',
      `bytes=${'9'.repeat(400)}-`,
    ]) {
      expect(rangeStart(huge)).toBe(Number.POSITIVE_INFINITY);
    }
    expect(rangeStart('bytes=0000000000000000000012-')).toBe(12);
  });
});
