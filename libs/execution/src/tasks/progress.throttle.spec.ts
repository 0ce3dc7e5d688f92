import { ProgressThrottle } from './progress.throttle';

describe(ProgressThrottle.name, () => {
  it('reports nothing in the first second, then at most once a second, with the totals', () => {
    const reports: unknown[] = [];
    const throttle = new ProgressThrottle((p) => reports.push(p), 1000, 0);
    for (let at = 0; at < 1000; at += 10) throttle.tick({ rows: at, bytes: at * 10 }, at);
    expect(reports).toEqual([]);
    throttle.tick({ rows: 100, bytes: 1000, streamingAt: 900 }, 1000);
    throttle.tick({ rows: 200, bytes: 2000, streamingAt: 900 }, 1500);
    throttle.tick({ rows: 300, bytes: 3000, streamingAt: 900 }, 2100);
    expect(reports).toEqual([
      { rows: 100, bytes: 1000, streamingAt: 900 },
      { rows: 300, bytes: 3000, streamingAt: 900 },
    ]);
  });

  describe('during a wait', () => {
    beforeEach(() => jest.useFakeTimers({ now: 0 }));
    afterEach(() => jest.useRealTimers());

    it('reports the rows made once a report is due while a write waits on the client', async () => {
      const reports: unknown[] = [];
      const throttle = new ProgressThrottle((p) => reports.push(p), 1000, 0);
      let release!: () => void;
      const write = new Promise<void>((resolve) => (release = resolve));
      let bytes = 100;
      const waited = throttle.during(write, () => ({ rows: 2000, bytes }));
      await jest.advanceTimersByTimeAsync(999);
      expect(reports).toEqual([]);
      bytes = 150;
      await jest.advanceTimersByTimeAsync(1);
      expect(reports).toEqual([{ rows: 2000, bytes: 150 }]);
      // One report for one wait, however long.
      await jest.advanceTimersByTimeAsync(5000);
      expect(reports).toHaveLength(1);
      release();
      await waited;
    });

    it('reports nothing for a wait that ends before a report is due', async () => {
      const reports: unknown[] = [];
      const throttle = new ProgressThrottle((p) => reports.push(p), 1000, 0);
      await jest.advanceTimersByTimeAsync(300);
      await throttle.during(Promise.resolve(), () => ({ rows: 10, bytes: 1 }));
      await jest.advanceTimersByTimeAsync(5000);
      expect(reports).toEqual([]);
    });
  });
});
