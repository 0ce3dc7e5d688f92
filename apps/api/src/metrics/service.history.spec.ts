import { ServiceHistory } from './service.history';

describe(ServiceHistory.name, () => {
  const start = 1_000_000_000_000; // a multiple of 5 s

  it('gives requests per second by outcome and p50/p99 of their durations, bucket by bucket', () => {
    const history = new ServiceHistory(5_000, 4);
    for (let i = 1; i <= 100; i++) history.request('succeeded', i, start + 100);
    history.request('failed', 7, start + 200);
    history.request('succeeded', 40, start + 5_000);
    const { bucket_ms, points } = history.view(start + 10_000);
    expect(bucket_ms).toBe(5_000);
    expect(points.map((p) => p.at)).toEqual([start - 5_000, start, start + 5_000, start + 10_000]);
    expect(points[0]).toEqual({
      at: start - 5_000,
      per_second: { succeeded: 0, failed: 0, cancelled: 0, rejected: 0, accepted: 0 },
      p50_ms: null,
      p99_ms: null,
      queued: null,
    });
    expect(points[1].per_second).toMatchObject({ succeeded: 20, failed: 0.2 });
    expect(points[1]).toMatchObject({ p50_ms: 50, p99_ms: 99 });
    expect(points[2]).toMatchObject({ per_second: { succeeded: 0.2 }, p50_ms: 40, p99_ms: 40 });
  });

  it('keeps the last depth sampled in a bucket, and forgets buckets past its window', () => {
    const history = new ServiceHistory(5_000, 2);
    history.queueDepth({ interactive: 3, export: 1 }, start);
    history.queueDepth({ interactive: 5, export: 0 }, start + 4_000);
    history.request('succeeded', 1, start);
    expect(history.view(start + 4_999).points[1].queued).toEqual({ interactive: 5, export: 0 });
    history.request('succeeded', 1, start + 20_000);
    const later = history.view(start + 20_000).points;
    expect(later.map((p) => p.queued)).toEqual([null, null]);
    expect(later[1].per_second.succeeded).toBe(1);
  });
});
