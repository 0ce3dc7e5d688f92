import type { ResultManifest } from './client.types';
import {
  AHEAD_BYTES,
  PIECE_BYTES,
  SegmentSource,
  segmentBytes,
  segmentsAsTheyCome,
} from './segments.reader';

/** A result of `sizes` segments of made-up bytes, and a store that serves each by its URL. */
function storeOf(sizes: number[]) {
  const whole = Buffer.alloc(sizes.reduce((a, b) => a + b, 0));
  for (let i = 0; i < whole.length; i++) whole[i] = (i * 31 + 7) % 251;
  let offset = 0;
  const segments = sizes.map((size, i) => {
    const segment = { offset, size, url: `http://store.test/s${i}` };
    offset += size;
    return segment;
  });
  const manifest: ResultManifest = {
    query_id: 'q',
    complete: true,
    size: whole.length,
    content_type: 'text/csv',
    segments,
  };
  /** Per URL: how long its answer waits (ms), and whether it answers short once. */
  const delays = new Map<string, number>();
  const short = new Set<string>();
  const fetchFn = (async (input: string | URL) => {
    const url = String(input);
    const segment = segments.find((s) => s.url === url)!;
    await new Promise((resolve) => setTimeout(resolve, delays.get(url) ?? 0));
    let bytes = whole.subarray(segment.offset, segment.offset + segment.size);
    if (short.delete(url)) bytes = bytes.subarray(0, bytes.length - 1);
    // Two parts, as a body that comes in pieces.
    const half = Math.floor(bytes.length / 2);
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new Uint8Array(bytes.subarray(0, half)));
        controller.enqueue(new Uint8Array(bytes.subarray(half)));
        controller.close();
      },
    });
    return new Response(body, { status: 200 });
  }) as typeof fetch;
  const source = (first = manifest, parallel = 3): SegmentSource => ({
    queryId: 'q',
    refresh: () => Promise.resolve(first),
    fetch: fetchFn,
    parallel,
    attempts: 2,
    idleMs: 5_000,
  });
  return { whole, manifest, delays, short, source };
}

/**
 * A store of segments of `sizes` bytes whose bodies come CHUNK bytes at a time, as the reader
 * pulls them (counted per segment); `longer` segments answer 10 bytes too many on their first
 * try.
 */
function chunkedStore(sizes: number[], longer = new Set<number>()) {
  const CHUNK = 256 * 1024;
  const store = storeOf(sizes);
  const pulled = sizes.map(() => 0);
  const fetches = sizes.map(() => 0);
  const fetchFn = ((input: string | URL) => {
    const i = store.manifest.segments.findIndex((s) => s.url === String(input));
    const { offset, size } = store.manifest.segments[i];
    const extra = longer.delete(i) ? 10 : 0;
    fetches[i]++;
    let at = 0;
    const body = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (at >= size + extra) return controller.close();
          const end = Math.min(at + CHUNK, size + extra);
          const chunk = new Uint8Array(end - at).fill(0xee);
          const real = store.whole.subarray(offset + at, offset + Math.min(end, size));
          chunk.set(real);
          pulled[i] += chunk.byteLength;
          at = end;
          controller.enqueue(chunk);
        },
      },
      { highWaterMark: 0 },
    );
    return Promise.resolve(new Response(body, { status: 200 }));
  }) as typeof fetch;
  const source = (parallel: number): SegmentSource => ({
    ...store.source(store.manifest, parallel),
    fetch: fetchFn,
  });
  return { ...store, CHUNK, pulled, fetches, source };
}

describe('segmentsAsTheyCome', () => {
  it('yields each segment as its download ends, with its offset: put there, they are the result', async () => {
    const store = storeOf([1000, 1500, 700]);
    store.delays.set('http://store.test/s0', 60);
    const order: number[] = [];
    const put = Buffer.alloc(store.whole.length);
    for await (const { offset, parts } of segmentsAsTheyCome(store.manifest, store.source())) {
      order.push(offset);
      let at = offset;
      for (const part of parts) {
        put.set(part, at);
        at += part.byteLength;
      }
    }
    // The first segment came last, and nothing waited for it.
    expect(order).toEqual([1000, 2500, 0]);
    expect(put.equals(store.whole)).toBe(true);
  });

  it('keeps at most `parallel` downloads under way', async () => {
    const store = storeOf([10, 10, 10, 10, 10]);
    let open = 0;
    let most = 0;
    const source = store.source(store.manifest, 2);
    const fetchFn = source.fetch;
    source.fetch = async (...args: Parameters<typeof fetch>) => {
      open++;
      most = Math.max(most, open);
      try {
        return await fetchFn(...args);
      } finally {
        open--;
      }
    };
    let count = 0;
    for await (const segment of segmentsAsTheyCome(store.manifest, source)) {
      if (segment.parts.length > 0) count++;
    }
    expect(count).toBe(5);
    expect(most).toBe(2);
  });

  it('starts the next download before it hands a segment over: one at a time, the next comes while the consumer writes', async () => {
    for (const read of ['as they come', 'in order'] as const) {
      const store = storeOf([100, 100, 100]);
      const source = store.source(store.manifest, 1);
      const fetchFn = source.fetch;
      const events: string[] = [];
      source.fetch = (input: string | URL | Request, init?: RequestInit) => {
        events.push(`fetch ${(input as string).slice(-2)}`);
        return fetchFn(input, init);
      };
      const segments =
        read === 'as they come'
          ? segmentsAsTheyCome(store.manifest, source)
          : segmentBytes(store.manifest, source);
      for await (const _ of segments) {
        void _;
        events.push('handed over');
        // The consumer's write.
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const handedOver = read === 'as they come' ? 1 : 2;
      // Each fetch but the first before the segment ahead of it is handed over.
      expect(events.slice(0, 2 + handedOver)).toEqual([
        'fetch s0',
        'fetch s1',
        ...Array<string>(handedOver).fill('handed over'),
      ]);
      expect(events.filter((e) => e.startsWith('fetch'))).toEqual([
        'fetch s0',
        'fetch s1',
        'fetch s2',
      ]);
    }
  });

  it('reads again a segment that came short, and follows a result still being written', async () => {
    const store = storeOf([400, 400, 400]);
    store.short.add('http://store.test/s1');
    // Only the first segment is written yet; the next manifest has them all.
    const running = {
      ...store.manifest,
      complete: false,
      segments: store.manifest.segments.slice(0, 1),
    };
    const offsets: number[] = [];
    let bytes = 0;
    for await (const { offset, parts } of segmentsAsTheyCome(
      running,
      store.source(store.manifest),
    )) {
      offsets.push(offset);
      bytes += parts.reduce((n, p) => n + p.byteLength, 0);
    }
    expect(offsets.sort((a, b) => a - b)).toEqual([0, 400, 800]);
    expect(bytes).toBe(1200);
  });

  it('fails when the complete manifest’s segments do not cover its size: never a short result', async () => {
    const store = storeOf([300, 300]);
    const wrong = { ...store.manifest, size: 601 };
    const reading = async () => {
      for await (const _ of segmentsAsTheyCome(wrong, store.source(wrong))) void _;
    };
    await expect(reading()).rejects.toThrow(
      "the result's segments hold 600 bytes, its manifest says 601",
    );
  });

  it('hands a large segment over in pieces as they come: a download holds two pieces at most, never the segment', async () => {
    const store = chunkedStore([3.5 * PIECE_BYTES, 2.25 * PIECE_BYTES, 3 * PIECE_BYTES]);
    const taken = store.manifest.segments.map(() => 0);
    const put = Buffer.alloc(store.whole.length);
    let mostAhead = 0;
    for await (const { offset, parts } of segmentsAsTheyCome(store.manifest, store.source(2))) {
      const i = store.manifest.segments.findIndex(
        (s) => offset >= s.offset && offset < s.offset + s.size,
      );
      const segment = store.manifest.segments[i];
      let at = offset;
      for (const part of parts) {
        put.set(part, at);
        at += part.byteLength;
      }
      // Within its segment, and a whole piece unless it is the segment's last.
      expect(at).toBeLessThanOrEqual(segment.offset + segment.size);
      if (at < segment.offset + segment.size)
        expect(at - offset).toBeGreaterThanOrEqual(PIECE_BYTES);
      taken[i] += at - offset;
      for (let j = 0; j < taken.length; j++)
        mostAhead = Math.max(mostAhead, store.pulled[j] - taken[j]);
      // The consumer's write.
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    expect(put.equals(store.whole)).toBe(true);
    // One piece waiting, one being gathered, and the chunk read past it.
    expect(mostAhead).toBeGreaterThan(PIECE_BYTES);
    expect(mostAhead).toBeLessThanOrEqual(2 * PIECE_BYTES + store.CHUNK);
  });

  it('never hands over bytes past a segment’s end: one longer than listed is read again from its start', async () => {
    const store = chunkedStore([1.5 * PIECE_BYTES, PIECE_BYTES / 2], new Set([0]));
    const put = Buffer.alloc(store.whole.length);
    const starts: number[] = [];
    for await (const { offset, parts } of segmentsAsTheyCome(store.manifest, store.source(1))) {
      starts.push(offset);
      let at = offset;
      for (const part of parts) {
        put.set(part, at);
        at += part.byteLength;
      }
      const segment = store.manifest.segments.find(
        (s) => offset >= s.offset && offset < s.offset + s.size,
      )!;
      expect(at).toBeLessThanOrEqual(segment.offset + segment.size);
    }
    expect(put.equals(store.whole)).toBe(true);
    expect(store.fetches).toEqual([2, 1]);
    // The first try's piece, then the segment again from its start.
    expect(starts).toEqual([0, 0, PIECE_BYTES, 1.5 * PIECE_BYTES]);
  });

  it('fails with the failed segment’s reason, dropping the pieces other downloads handed over, none of them unhandled', async () => {
    // Two slow segments (a chunk every 60 ms: a piece in 240 ms) and one the store refuses twice,
    // 150 ms each; the consumer takes 120 ms a piece. The refusal comes while one download's
    // first piece waits behind the other's and that download reads its second.
    const store = chunkedStore([2 * PIECE_BYTES, 2 * PIECE_BYTES, 1000]);
    const source = store.source(3);
    const slowFetch = source.fetch;
    source.fetch = async (input, init) => {
      if ((input as string).endsWith('/s2')) {
        await new Promise((resolve) => setTimeout(resolve, 150));
        return new Response('no', { status: 500 });
      }
      const res = await slowFetch(input, init);
      const reader = res.body!.getReader();
      const body = new ReadableStream<Uint8Array>(
        {
          async pull(controller) {
            await new Promise((resolve) => setTimeout(resolve, 60));
            // As fetch's body does once its request is aborted.
            if (init?.signal?.aborted) return controller.error(init.signal.reason);
            const { done, value } = await reader.read();
            if (done) controller.close();
            else controller.enqueue(value);
          },
        },
        { highWaterMark: 0 },
      );
      return new Response(body, { status: 200 });
    };
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const reading = async () => {
        for await (const _ of segmentsAsTheyCome(store.manifest, source)) {
          void _;
          await new Promise((resolve) => setTimeout(resolve, 120));
        }
      };
      await expect(reading()).rejects.toThrow('segment 3 of the result');
      // Long enough for the download still reading to see the read end.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('gives the same bytes as segmentBytes, which yields them in order', async () => {
    const store = storeOf([256, 512, 128, 64]);
    store.delays.set('http://store.test/s1', 30);
    const inOrder: Uint8Array[] = [];
    for await (const part of segmentBytes(store.manifest, store.source())) inOrder.push(part);
    expect(Buffer.concat(inOrder).equals(store.whole)).toBe(true);
  });
});

describe('segmentBytes', () => {
  it('yields a segment as it comes, and holds at most AHEAD_BYTES of each download behind it', async () => {
    const MIB = 1024 * 1024;
    const store = chunkedStore([AHEAD_BYTES + 4 * MIB, AHEAD_BYTES + 4 * MIB, 2 * MIB]);
    const { segments } = store.manifest;
    const taken = segments.map(() => 0);
    let at = 0;
    let mostAhead = 0;
    let pulledAtFirst = -1;
    const parts: Uint8Array[] = [];
    for await (const part of segmentBytes(store.manifest, store.source(2))) {
      if (pulledAtFirst < 0) pulledAtFirst = store.pulled[0];
      parts.push(part);
      const i = segments.findIndex((s) => at >= s.offset && at < s.offset + s.size);
      at += part.byteLength;
      taken[i] += part.byteLength;
      for (let j = 0; j < segments.length; j++)
        mostAhead = Math.max(mostAhead, store.pulled[j] - taken[j]);
      // The consumer's write: slower than the store, so that the downloads run ahead.
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    expect(Buffer.concat(parts).equals(store.whole)).toBe(true);
    // Given out before its download ended, and long before the segment behind it could end.
    expect(pulledAtFirst).toBeLessThan(2 * PIECE_BYTES + store.CHUNK);
    // The download behind ran ahead, as far as its bound: what it holds, the piece it waits to
    // hand over, the one it gathers, the chunk read past it, and the piece being given out.
    expect(mostAhead).toBeGreaterThan(AHEAD_BYTES);
    expect(mostAhead).toBeLessThanOrEqual(AHEAD_BYTES + 3 * PIECE_BYTES + store.CHUNK);
  });

  it('reads again a small segment that came longer than listed: nothing of it was given out', async () => {
    const store = chunkedStore([PIECE_BYTES / 2, PIECE_BYTES / 4], new Set([0]));
    const parts: Uint8Array[] = [];
    for await (const part of segmentBytes(store.manifest, store.source(2))) parts.push(part);
    expect(Buffer.concat(parts).equals(store.whole)).toBe(true);
    expect(store.fetches).toEqual([2, 1]);
  });

  it('fails, naming the segment, when one turns out longer than listed after bytes of it were given out', async () => {
    const store = chunkedStore([1.5 * PIECE_BYTES, PIECE_BYTES / 2], new Set([0]));
    let given = 0;
    const reading = async () => {
      for await (const part of segmentBytes(store.manifest, store.source(1))) {
        given += part.byteLength;
      }
    };
    await expect(reading()).rejects.toThrow(
      `segment 1 of the result (bytes 0-${1.5 * PIECE_BYTES - 1}) is not what the manifest lists: more than the ${1.5 * PIECE_BYTES} bytes the manifest says, after its first ${PIECE_BYTES} bytes were given out`,
    );
    // Its first piece, never more, and never read again.
    expect(given).toBe(PIECE_BYTES);
    expect(store.fetches[0]).toBe(1);
  });
});

describe('a store that goes silent', () => {
  /**
   * A real HTTP store on loopback serving `whole` as one segment: `silent` tries are taken and
   * never answered (`head`: nothing at all; `body`: the head and half the bytes, then nothing).
   */
  async function silentStore(whole: Buffer, silent: { tries: number; at: 'head' | 'body' }) {
    const http = await import('node:http');
    const ranges: (string | undefined)[] = [];
    const held: import('node:http').ServerResponse[] = [];
    const server = http.createServer((req, res) => {
      ranges.push(req.headers.range);
      const from = Number(/^bytes=(\d+)-$/.exec(req.headers.range ?? '')?.[1] ?? 0);
      const bytes = whole.subarray(from);
      const head = { 'content-length': String(bytes.length) };
      if (ranges.length <= silent.tries) {
        held.push(res);
        if (silent.at === 'body') {
          res.writeHead(from > 0 ? 206 : 200, head);
          res.write(bytes.subarray(0, bytes.length >> 1));
        }
        return;
      }
      res.writeHead(from > 0 ? 206 : 200, head);
      res.end(bytes);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as import('node:net').AddressInfo;
    const manifest: ResultManifest = {
      query_id: 'q',
      complete: true,
      size: whole.length,
      content_type: 'text/csv',
      segments: [{ offset: 0, size: whole.length, url: `http://127.0.0.1:${port}/s0` }],
    };
    const source: SegmentSource = {
      queryId: 'q',
      refresh: () => Promise.resolve(manifest),
      fetch: (input, init) => fetch(input, init),
      parallel: 1,
      attempts: 2,
      idleMs: 200,
    };
    const close = async () => {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    };
    return { manifest, source, ranges, close };
  }

  const whole = Buffer.from('a,b\n'.repeat(50_000));

  it('fails with the reason when the store takes every try and never answers: never a wait for ever', async () => {
    const store = await silentStore(whole, { tries: 2, at: 'head' });
    try {
      const started = Date.now();
      const reading = async () => {
        for await (const _ of segmentsAsTheyCome(store.manifest, store.source)) void _;
      };
      await expect(reading()).rejects.toThrow(
        'segment 1 of the result (bytes 0-199999) could not be downloaded from the store: the store sent nothing for 0.2 s after 0 bytes',
      );
      expect(store.ranges).toEqual([undefined, undefined]);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await store.close();
    }
  });

  it('drops a try that stalls mid-body and reads the rest with Range: the bytes whole', async () => {
    const store = await silentStore(whole, { tries: 1, at: 'body' });
    try {
      const parts: Uint8Array[] = [];
      for await (const part of segmentBytes(store.manifest, store.source)) parts.push(part);
      expect(Buffer.concat(parts).equals(whole)).toBe(true);
      expect(store.ranges).toHaveLength(2);
      expect(store.ranges[1]).toMatch(/^bytes=[1-9]\d*-$/);
    } finally {
      await store.close();
    }
  });
});
