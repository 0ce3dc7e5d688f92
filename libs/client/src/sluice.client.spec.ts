import { SluiceClient } from './sluice.client';
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
