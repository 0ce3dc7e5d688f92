import { isoYearEnd } from './iso-date.check';

describe('isoYearEnd', () => {
  it.each([
    ['2026-11-28', 4],
    ['0044-03-15 BC', 4],
    ['12345-01-02', 5],
    ['2026-11-28 11:22:33.5', 4],
    ['2026-11-28 11:22:33+05:30', 4],
  ])('returns where the year of ISO text %s ends', (text, end) => {
    expect(isoYearEnd(text)).toBe(end);
  });

  it.each([
    ['28.11.2026'],
    ['11/28/2026'],
    ['11-28-2026'],
    ['Sat Nov 28 11:22:33 2026 UTC'],
    ['infinity'],
    ['-infinity'],
    ['202-11-28'],
    ['2026'],
    [''],
  ])('returns -1 for %j, which is not in DateStyle ISO', (text) => {
    expect(isoYearEnd(text)).toBe(-1);
  });

  it.each([
    ['2026-11-28', [0, 1, 2, 3, 4, 7]],
    ['12345-01-02', [0, 1, 2, 3, 4, 5, 8]],
  ])('returns -1 when a digit of the year of %s or a dash is something else', (text, places) => {
    for (const at of places) {
      const spoilt = text.slice(0, at) + 'x' + text.slice(at + 1);
      expect([spoilt, isoYearEnd(spoilt)]).toEqual([spoilt, -1]);
    }
  });
});
