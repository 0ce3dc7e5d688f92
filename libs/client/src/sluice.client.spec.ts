import { SERVICE_GONE_MS, SluiceClient } from './sluice.client';
import { SluiceClientError } from './sluice-client.error';

/** A client whose fetch answers every request with `body` as a stream+json response. */
function clientAnswering(lines: string[]): SluiceClient {
  const fetchFn = () =>
    Promise.resolve(
      new Response(lines.map((line) => `${line}\n`).join(''), {
        status: 200,
        headers: { 'content-type': 'application/stream+json' },
      }),
    );
  return new SluiceClient({
    url: 'http://sluice.invalid',
    credentials: { basic: { username: 'u', password: 'p' } },
    fetch: fetchFn,
  });
}

async function failureOf(client: SluiceClient): Promise<SluiceClientError> {
  const err = await client.query('select 1').then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SluiceClientError);
  return err as SluiceClientError;
}

const cancelled = '{"status":{"reason":"query cancelled","sql_state":"57014","vendor_code":-900}}';

describe(SluiceClient.name, () => {
  it('throws the error status of a stream once its body has ended', async () => {
    // One line a read (no read ahead), so that the body's end is a read of its own.
    const lines = ['{"query_id":"q","schema":[]}\n', `${cancelled}\n`];
    const seen = { ended: false, cancelled: false };
    const body = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          const line = lines.shift();
          if (line === undefined) {
            seen.ended = true;
            controller.close();
          } else controller.enqueue(new TextEncoder().encode(line));
        },
        cancel() {
          seen.cancelled = true;
        },
      },
      { highWaterMark: 0 },
    );
    const client = new SluiceClient({
      url: 'http://sluice.invalid',
      credentials: { basic: { username: 'u', password: 'p' } },
      // Not a Response: one would read its body ahead through a stream of its own.
      fetch: () =>
        Promise.resolve({ ok: true, status: 200, headers: new Headers(), body } as Response),
    });
    const err = await failureOf(client);
    expect(err).toMatchObject({ kind: 'status', sqlState: '57014', queryId: 'q' });
    expect(seen).toEqual({ ended: true, cancelled: false });
  });

  it('gives the seconds of Retry-After with a failure worth retrying, in the envelope or not', async () => {
    const answers = [
      new Response(
        '{"status":{"reason":"too many queries","sql_state":"53000","vendor_code":-108}}',
        { status: 429, headers: { 'retry-after': '3', 'content-type': 'application/json' } },
      ),
      new Response('<html>busy</html>', { status: 503, headers: { 'retry-after': '7' } }),
      new Response('<html>busy</html>', { status: 503 }),
    ];
    const client = new SluiceClient({
      url: 'http://sluice.invalid',
      credentials: { basic: { username: 'u', password: 'p' } },
      fetch: () => Promise.resolve(answers.shift()!),
    });
    expect(await failureOf(client)).toMatchObject({
      httpStatus: 429,
      sqlState: '53000',
      retryable: true,
      retryAfterSeconds: 3,
    });
    expect(await failureOf(client)).toMatchObject({
      kind: 'status',
      httpStatus: 503,
      retryable: true,
      retryAfterSeconds: 7,
    });
    expect((await failureOf(client)).retryAfterSeconds).toBeUndefined();
  });

  it('takes a line after an error status for a broken stream, as after a success', async () => {
    for (const status of [
      cancelled,
      '{"status":{"reason":"OK","sql_state":"00000","vendor_code":0}}',
    ]) {
      const err = await failureOf(
        clientAnswering(['{"query_id":"q","schema":[]}', status, '{"data":[[1]]}']),
      );
      expect(err).toMatchObject({ kind: 'protocol' });
    }
  });
});

describe('a kept result read from the store', () => {
  /**
   * A client whose fetch answers the manifest of one 10-byte segment and, from the store, takes
   * every try and never answers it (until the try is aborted); `tries` counts them.
   */
  function clientOfSilentStore(storeIdleTimeoutMs?: number) {
    const tries: number[] = [];
    const started = Date.now();
    const fetchFn = ((input: string | URL, init?: RequestInit) => {
      const url = String(input);
      if (url.endsWith('/result/segments')) {
        const manifest = {
          query_id: 'q',
          complete: true,
          size: 10,
          content_type: 'text/csv',
          segments: [{ offset: 0, size: 10, url: 'http://store.invalid/s0' }],
        };
        return Promise.resolve(Response.json(manifest));
      }
      tries.push(Date.now() - started);
      return new Promise<Response>((_, reject) =>
        init!.signal!.addEventListener('abort', () => reject(new Error('aborted'))),
      );
    }) as typeof fetch;
    const client = new SluiceClient({
      url: 'http://sluice.invalid',
      credentials: { basic: { username: 'u', password: 'p' } },
      fetch: fetchFn,
      storeIdleTimeoutMs,
    });
    return { client, tries };
  }

  afterEach(() => jest.useRealTimers());

  it('drops a download the store never answers after 30 s, three times, then fails naming it', async () => {
    jest.useFakeTimers();
    const { client, tries } = clientOfSilentStore();
    const result = await client.result('q');
    expect(result.source).toBe('segments');
    const reading = new Response(result.body).arrayBuffer().then(
      () => undefined,
      (e: unknown) => e,
    );
    await jest.advanceTimersByTimeAsync(29_999);
    expect(tries).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(60_001);
    expect(tries).toEqual([0, 30_000, 60_000]);
    await jest.advanceTimersByTimeAsync(30_000);
    const err = (await reading) as SluiceClientError;
    expect(err).toBeInstanceOf(SluiceClientError);
    expect(err.message).toBe(
      'segment 1 of the result (bytes 0-9) could not be downloaded from the store: the store sent nothing for 30 s after 0 bytes',
    );
    expect(err).toMatchObject({ kind: 'connection', queryId: 'q' });
  });

  it('takes storeIdleTimeoutMs, and refuses one that is not above 0', async () => {
    const { client, tries } = clientOfSilentStore(50);
    const result = await client.result('q');
    await expect(new Response(result.body).arrayBuffer()).rejects.toThrow(
      'the store sent nothing for 0.05 s after 0 bytes',
    );
    expect(tries).toHaveLength(3);
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => clientOfSilentStore(bad)).toThrow(
        'storeIdleTimeoutMs must be a number of milliseconds above 0',
      );
    }
  });
});

describe('a resumable export whose service goes away', () => {
  it('asks for the query’s state until the service answers, for a minute at most, then fails saying so', async () => {
    jest.useFakeTimers();
    try {
      const asked: number[] = [];
      const started = Date.now();
      const fetchFn = ((input: string | URL) => {
        const url = String(input);
        if (url.endsWith('/v1/execute')) {
          // Two bytes, then the connection breaks.
          let sent = false;
          const body = new ReadableStream<Uint8Array>({
            pull(controller) {
              if (sent) return controller.error(new TypeError('terminated'));
              sent = true;
              controller.enqueue(new Uint8Array([1, 2]));
            },
          });
          return Promise.resolve(
            new Response(body, { status: 200, headers: { 'x-query-id': 'q' } }),
          );
        }
        asked.push(Date.now() - started);
        return Promise.reject(new TypeError('fetch failed: connect ECONNREFUSED'));
      }) as typeof fetch;
      const client = new SluiceClient({
        url: 'http://sluice.invalid',
        credentials: { basic: { username: 'u', password: 'p' } },
        fetch: fetchFn,
      });
      const result = await client.export('select 1', undefined, 'csv', { resumable: true });
      const reading = new Response(result.body).arrayBuffer().then(
        () => undefined,
        (e: unknown) => e,
      );
      await jest.advanceTimersByTimeAsync(SERVICE_GONE_MS - 2_001);
      expect(asked.at(-1)).toBeLessThan(SERVICE_GONE_MS);
      await jest.advanceTimersByTimeAsync(4_000);
      const err = (await reading) as SluiceClientError;
      expect(err).toBeInstanceOf(SluiceClientError);
      expect(err).toMatchObject({ kind: 'connection', queryId: 'q' });
      expect(err.message).toMatch(
        /^the download broke, and the service has not answered for 60 s since: .*ECONNREFUSED/,
      );
      // Asked again and again meanwhile, never more than 2 s apart, and given up after a minute.
      expect(asked.length).toBeGreaterThan(20);
      expect(asked.at(-1)).toBeGreaterThanOrEqual(SERVICE_GONE_MS);
      expect(SERVICE_GONE_MS).toBe(60_000);
    } finally {
      jest.useRealTimers();
    }
  });
});
