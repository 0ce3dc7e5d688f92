import { WrittenRanges } from './written.ranges';

describe(WrittenRanges.name, () => {
  it('answers the bytes of each write no write covered before, however they overlap', () => {
    const ranges = new WrittenRanges();
    expect(ranges.add(10, 20)).toBe(10);
    expect(ranges.add(30, 40)).toBe(10);
    // Inside one, touching both, spanning both, past the end.
    expect(ranges.add(12, 18)).toBe(0);
    expect(ranges.add(20, 30)).toBe(10);
    expect(ranges.add(0, 50)).toBe(20);
    expect(ranges.add(45, 60)).toBe(10);
    expect(ranges.add(0, 60)).toBe(0);
  });
});
