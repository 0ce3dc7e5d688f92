import { ProgressThrottle } from './progress.throttle';

describe(ProgressThrottle.name, () => {
  it('reports nothing in the first second, then at most once a second, with the totals', () => {
    const reports: unknown[] = [];
    const throttle = new ProgressThrottle((p) => reports.push(p), 1000, 0);
    for (let at = 0; at < 1000; at += 10) throttle.tick(at, at * 10, at);
    expect(reports).toEqual([]);
    throttle.tick(100, 1000, 1000);
    throttle.tick(200, 2000, 1500);
    throttle.tick(300, 3000, 2100);
    expect(reports).toEqual([
      { rows: 100, bytes: 1000 },
      { rows: 300, bytes: 3000 },
    ]);
  });
});
