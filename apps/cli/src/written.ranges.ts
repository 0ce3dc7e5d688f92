/**
 * Bytes of a file covered by writes at offsets, counted once: a segment read again is written
 * again over what its first try wrote (see segmentsAsTheyCome), and a progress line that added
 * every write would pass the file's size.
 */
export class WrittenRanges {
  /** Disjoint, in order, none touching the next: [start, end) each. */
  private readonly ranges: [number, number][] = [];

  /** Takes in a write of [start, end); answers the bytes of it no write covered before. */
  add(start: number, end: number): number {
    let fresh = end - start;
    let lo = start;
    let hi = end;
    let first = 0;
    while (first < this.ranges.length && this.ranges[first][1] < start) first++;
    let last = first;
    for (; last < this.ranges.length && this.ranges[last][0] <= end; last++) {
      const [from, to] = this.ranges[last];
      fresh -= Math.max(0, Math.min(to, end) - Math.max(from, start));
      lo = Math.min(lo, from);
      hi = Math.max(hi, to);
    }
    this.ranges.splice(first, last - first, [lo, hi]);
    return fresh;
  }
}
