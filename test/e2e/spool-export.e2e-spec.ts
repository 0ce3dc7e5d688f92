import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { get as httpGet } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SluiceClient, SluiceClientError } from '@app/client';
import { e2eEnv, eventually, execute, login, request } from './support/client';
import { ROOT } from './support/service';

/**
 * libs/client and `sluice export` reading a kept result by its manifest: with presigned URLs
 * (SLUICE_E2E_SPOOL=s3, s3rver) its segments come straight from the store, several at once, and
 * are put end to end; without (a directory, or kept in Redis) the body comes through the api as
 * one stream. Either way the bytes are those GET …/result sends.
 */
const presigned = () => e2eEnv().spool === 's3';

/**
 * ~190 KiB of CSV: three segments or more of the suite's 64 KiB, read 1,000 rows (~64 KiB) at a
 * time. Left to the server, a read after the first takes up to an entry (1 MiB) of rows at once,
 * and a segment is sealed between two reads: the whole result would fit in two.
 */
const STATEMENT =
  'select g, md5(g::text) as h, md5((g * 7)::text) as i from generate_series(1, 3000) g';
const FETCH_SIZE = 1000;

let token: string;
let work: string;

beforeAll(async () => {
  token = await login();
  work = mkdtempSync(join(tmpdir(), 'sluice-spool-export-'));
});

afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Kept results made by a test, dropped after it: the suite's spool caps all of them at 2 MiB. */
const kept: string[] = [];
afterEach(async () => {
  for (const queryId of kept.splice(0)) {
    await request(undefined, { method: 'DELETE', path: `/v1/queries/${queryId}`, token });
  }
});

/** What one request to the store or the api was, as the client's fetch saw it. */
interface Seen {
  url: string;
  range?: string;
}

/**
 * The client as the suite's admin, its fetch watched: each request is recorded, the most at
 * once counted (until its body ends), and `fault` may answer instead of the network.
 */
function watchedClient(
  fault?: (
    url: string,
    init: RequestInit | undefined,
    nth: number,
  ) => Promise<Response | undefined> | undefined,
) {
  const env = e2eEnv();
  const seen: Seen[] = [];
  const state = { open: 0, most: 0 };
  const watched: typeof fetch = async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    const range = new Headers(init?.headers).get('range') ?? undefined;
    seen.push({ url, range });
    const nth = seen.filter((s) => s.url === url).length;
    const faulted = await fault?.(url, init, nth);
    if (faulted) return faulted;
    const res = await fetch(input, init);
    if (!url.startsWith(env.s3?.endpoint ?? '\0') || !res.body) return res;
    state.open++;
    state.most = Math.max(state.most, state.open);
    const body = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({ flush: () => void state.open-- }),
    );
    return new Response(body, {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
  };
  const client = new SluiceClient({
    url: env.baseUrl,
    credentials: { username: env.adminUser, password: env.adminPassword },
    fetch: watched,
  });
  return {
    client,
    seen,
    state,
    fromStore: () => seen.filter((s) => s.url.startsWith(env.s3?.endpoint ?? '\0')),
  };
}

/** The body GET …/result sends, uncompressed: what every download must equal. */
function throughApi(queryId: string): Promise<Buffer> {
  const url = new URL(`${e2eEnv().baseUrl}/v1/queries/${queryId}/result`);
  const headers = { authorization: `Bearer ${token}`, 'accept-encoding': 'identity' };
  return new Promise((resolve, reject) => {
    httpGet(url, { headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (part: Buffer) => parts.push(part));
      res.on('end', () => resolve(Buffer.concat(parts)));
      res.on('error', reject);
    }).on('error', reject);
  });
}

/** STATEMENT sent to be kept (answered 202 at once), as CSV; its id, dropped after the test. */
async function keptQuery(): Promise<string> {
  const sent = await execute(
    { statement: STATEMENT, wait_timeout: 0, fetch_size: FETCH_SIZE },
    { token, headers: { accept: 'text/csv', 'accept-encoding': 'identity' } },
  );
  expect(sent.status).toBe(202);
  const queryId = sent.json.query_id as string;
  kept.push(queryId);
  return queryId;
}

async function bytesOf(body: ReadableStream<Uint8Array>): Promise<Buffer> {
  return Buffer.from(await new Response(body).arrayBuffer());
}

describe('SluiceClient.export of a kept result', () => {
  it('downloads the segments straight from the store, at most segmentDownloads at once, end to end; through the api when they have no URLs', async () => {
    const { client, seen, state, fromStore } = watchedClient();
    const result = await client.export(STATEMENT, undefined, 'csv', {
      waitTimeout: 0,
      fetchSize: FETCH_SIZE,
      segmentDownloads: 2,
    });
    kept.push(result.queryId);
    const bytes = await bytesOf(result.body);
    expect(bytes.equals(await throughApi(result.queryId))).toBe(true);
    expect(bytes.toString().split('\r\n')[0]).toBe('g,h,i');
    const manifest = await client.manifest(result.queryId).catch((e: SluiceClientError) => e);
    const resultReads = seen.filter((s) => s.url.endsWith(`/v1/queries/${result.queryId}/result`));
    if (presigned()) {
      expect(result.source).toBe('segments');
      const { segments } = manifest as Exclude<typeof manifest, SluiceClientError>;
      expect(segments.length).toBeGreaterThanOrEqual(3);
      expect(fromStore().length).toBe(segments.length);
      expect(state.most).toBeLessThanOrEqual(2);
      // No byte of the body through the api.
      expect(resultReads).toEqual([]);
    } else {
      expect(result.source).toBe('service');
      expect(fromStore()).toEqual([]);
      expect(resultReads.length).toBe(1);
      if (e2eEnv().spool === 'redis') expect((manifest as SluiceClientError).httpStatus).toBe(404);
    }
  });

  it('reads the kept result of a query sent earlier by result(): from the store when it can, through the api with segmentDownloads 0', async () => {
    const { client, fromStore } = watchedClient();
    const queryId = await keptQuery();
    const whole = await client.result(queryId);
    expect((await bytesOf(whole.body)).equals(await throughApi(queryId))).toBe(true);
    expect(whole.source).toBe(presigned() ? 'segments' : 'service');
    const stores = fromStore().length;
    const streamed = await client.result(queryId, { segmentDownloads: 0 });
    expect(streamed.source).toBe('service');
    expect((await bytesOf(streamed.body)).equals(await throughApi(queryId))).toBe(true);
    expect(fromStore().length).toBe(stores);
  });

  it('gives a result read from the store also as segments with their offsets, each downloaded once: the body reads nothing then', async () => {
    const { client, state, fromStore } = watchedClient();
    const queryId = await keptQuery();
    const result = await client.result(queryId, { segmentDownloads: 2 });
    if (!presigned()) {
      expect(result.source).toBe('service');
      expect(result.segments).toBeUndefined();
      await result.body.cancel();
      return;
    }
    const expected = await throughApi(queryId);
    const put = Buffer.alloc(expected.length);
    const offsets: number[] = [];
    for await (const { offset, parts } of result.segments!) {
      offsets.push(offset);
      let at = offset;
      for (const part of parts) {
        put.set(part, at);
        at += part.byteLength;
      }
    }
    expect(put.equals(expected)).toBe(true);
    const { segments } = await client.manifest(queryId);
    expect([...offsets].sort((a, b) => a - b)).toEqual(segments.map((s) => s.offset));
    // Each segment fetched once: the body, not read, started no download of its own.
    expect(fromStore().length).toBe(segments.length);
    expect(state.most).toBeLessThanOrEqual(2);
  });

  it('follows a query that still runs: segments written later are asked for and read as they come', async () => {
    const { client, seen } = watchedClient();
    // About 1.5 s of rows; the suite seals a segment that holds bytes at the next chunk after 1 s.
    const slow = `select g, md5(g::text) as h, md5((g * 7)::text) as i,
                         case when g % 500 = 0 then pg_sleep(0.25) end as s
                    from generate_series(1, 3000) g`;
    const result = await client.export(slow, undefined, 'csv', {
      waitTimeout: 0,
      fetchSize: 100,
    });
    kept.push(result.queryId);
    const bytes = await bytesOf(result.body);
    expect(bytes.equals(await throughApi(result.queryId))).toBe(true);
    expect(bytes.toString().trimEnd().split('\r\n').length).toBe(3001);
    if (presigned()) {
      expect(result.source).toBe('segments');
      const manifests = seen.filter((s) => s.url.endsWith('/result/segments'));
      expect(manifests.length).toBeGreaterThan(1);
    }
  });

  it('retries a segment whose download failed, resumes one cut short with Range, and gives the same bytes', async () => {
    if (!presigned()) return;
    const broken = new Set<string>();
    const { client, fromStore } = watchedClient(async (url, init, nth) => {
      if (!url.startsWith(e2eEnv().s3!.endpoint)) return undefined;
      const index = [...new Set(fromStore().map((s) => s.url))].indexOf(url);
      if (index === 1 && nth === 1) throw new TypeError('fetch failed: socket hang up');
      if (index === 2 && nth === 1) {
        // Half the segment, then the connection breaks.
        const whole = await fetch(url, init);
        const half = Buffer.from(await whole.arrayBuffer()).subarray(0, 10_000);
        broken.add(url);
        // Erred once its first chunk is read (an error in start would drop the chunk unread).
        return new Response(
          new ReadableStream<Uint8Array>({
            start: (controller) => controller.enqueue(new Uint8Array(half)),
            pull: (controller) => controller.error(new TypeError('terminated')),
          }),
          { status: 200 },
        );
      }
      return undefined;
    });
    const result = await client.export(STATEMENT, undefined, 'csv', {
      waitTimeout: 0,
      fetchSize: FETCH_SIZE,
    });
    kept.push(result.queryId);
    const bytes = await bytesOf(result.body);
    expect(result.source).toBe('segments');
    expect(bytes.equals(await throughApi(result.queryId))).toBe(true);
    const resumed = fromStore().filter((s) => broken.has(s.url));
    expect(resumed.map((s) => s.range)).toEqual([undefined, 'bytes=10000-']);
  });

  it('fails with the segment, its bytes and why when the store keeps refusing it: never a short file', async () => {
    if (!presigned()) return;
    const { client, fromStore } = watchedClient((url) => {
      if (!url.startsWith(e2eEnv().s3!.endpoint)) return undefined;
      const index = [...new Set(fromStore().map((s) => s.url.split('?')[0]))].indexOf(
        url.split('?')[0],
      );
      return index === 1
        ? Promise.resolve(new Response('denied', { status: 403, statusText: 'Forbidden' }))
        : undefined;
    });
    const result = await client.export(STATEMENT, undefined, 'csv', {
      waitTimeout: 0,
      fetchSize: FETCH_SIZE,
    });
    kept.push(result.queryId);
    const err = await bytesOf(result.body).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SluiceClientError);
    expect((err as SluiceClientError).kind).toBe('connection');
    expect((err as SluiceClientError).queryId).toBe(result.queryId);
    const second = (await client.manifest(result.queryId)).segments[1];
    expect((err as Error).message).toBe(
      `segment 2 of the result (bytes ${second.offset}-${second.offset + second.size - 1}) could not be downloaded from the store: HTTP 403 Forbidden`,
    );
  });

  it('asks for fresh URLs when the store refuses one (expired), and goes on', async () => {
    if (!presigned()) return;
    const path = (url: string) => url.split('?')[0];
    let refused: string | undefined;
    const { client, seen } = watchedClient((url) => {
      if (!url.startsWith(e2eEnv().s3!.endpoint) || refused !== undefined) return undefined;
      refused = path(url);
      return Promise.resolve(new Response('expired', { status: 403, statusText: 'Forbidden' }));
    });
    const result = await client.export(STATEMENT, undefined, 'csv', {
      waitTimeout: 0,
      fetchSize: FETCH_SIZE,
    });
    kept.push(result.queryId);
    const bytes = await bytesOf(result.body);
    expect(bytes.equals(await throughApi(result.queryId))).toBe(true);
    // Between the refusal and the segment's next try, the manifest was asked for again.
    const tries = seen.flatMap((s, i) => (path(s.url) === refused ? [i] : []));
    expect(tries.length).toBe(2);
    const between = seen.slice(tries[0], tries[1]);
    expect(between.some((s) => s.url.endsWith('/result/segments'))).toBe(true);
  });

  it('reads a segment again whose download ended short of the size the manifest gives', async () => {
    if (!presigned()) return;
    const { client, fromStore } = watchedClient(async (url, init, nth) => {
      if (!url.startsWith(e2eEnv().s3!.endpoint) || nth > 1) return undefined;
      const index = [...new Set(fromStore().map((s) => s.url))].indexOf(url);
      if (index !== 0) return undefined;
      const whole = Buffer.from(await (await fetch(url, init)).arrayBuffer());
      return new Response(new Uint8Array(whole.subarray(0, whole.length - 1)), { status: 200 });
    });
    const result = await client.export(STATEMENT, undefined, 'csv', {
      waitTimeout: 0,
      fetchSize: FETCH_SIZE,
    });
    kept.push(result.queryId);
    const bytes = await bytesOf(result.body);
    expect(bytes.equals(await throughApi(result.queryId))).toBe(true);
    const first = fromStore()[0].url;
    expect(fromStore().filter((s) => s.url === first).length).toBe(2);
  });
});

describe('sluice export --keep', () => {
  /** Runs `sluice …` as a user with the suite's admin credentials in the environment. */
  async function sluice(args: string[], terminal = false) {
    const env = {
      PATH: process.env.PATH ?? '',
      HOME: work,
      XDG_CONFIG_HOME: join(work, 'config'),
      SLUICE_URL: e2eEnv().baseUrl,
      SLUICE_USER: e2eEnv().adminUser,
      SLUICE_PASSWORD: e2eEnv().adminPassword,
    };
    const bin = join(ROOT, 'dist/apps/api/src/cli/main.js');
    const child = terminal
      ? spawn('script', ['-qfec', `${process.execPath} ${bin} ${args.join(' ')}`, '/dev/null'], {
          env: { ...env, TERM: 'xterm', COLUMNS: '160' },
          stdio: ['pipe', 'pipe', 'pipe'],
        })
      : spawn(process.execPath, [bin, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdin.end();
    const [code] = (await once(child, 'close')) as [number | null];
    return { code, stdout, stderr };
  }

  /** The newest query of the admin's with this statement. */
  async function lastQueryOf(statement: string): Promise<string> {
    return eventually(async () => {
      const res = await request(undefined, { method: 'GET', path: '/v1/queries', token });
      const list = res.json as unknown as { query_id: string; statement: string }[];
      return list.find((q) => q.statement === statement)?.query_id;
    });
  }

  it('writes the file from the store, --parallel at a time (the progress line says so), or through the api without URLs', async () => {
    const marker = `cli-${Date.now()}`;
    const statement = `select g, md5(g::text) as h, '${marker}' as m from generate_series(1, 3000) g`;
    const out = join(work, 'kept.csv');
    const run = await sluice(
      ['export', `"${statement}"`, '-o', out, '--keep', '--parallel', '3'],
      true,
    );
    expect(run.code).toBe(0);
    const bytes = readFileSync(out);
    const queryId = await lastQueryOf(statement);
    kept.push(queryId);
    expect(bytes.equals(await throughApi(queryId))).toBe(true);
    if (presigned()) expect(run.stdout).toContain('from the store, 3 at a time');
    else expect(run.stdout).not.toContain('from the store');
    // Without --parallel: 4 at a time.
    const byDefault = await sluice(['export', `"${statement}"`, '-o', out, '--keep'], true);
    expect(byDefault.code).toBe(0);
    const both = await eventually(async () => {
      const res = await request(undefined, { method: 'GET', path: '/v1/queries', token });
      const list = res.json as unknown as { query_id: string; statement: string }[];
      const ids = list.filter((q) => q.statement === statement).map((q) => q.query_id);
      return ids.length === 2 ? ids : undefined;
    });
    kept.push(...both.filter((id) => id !== queryId));
    expect(readFileSync(out).equals(bytes)).toBe(true);
    if (presigned()) expect(byDefault.stdout).toContain('from the store, 4 at a time');
  });

  it('writes the result to standard output in order, from the store when it can: the same bytes', async () => {
    const marker = `cli-out-${Date.now()}`;
    const statement = `select g, md5(g::text) as h, '${marker}' as m from generate_series(1, 6000) g`;
    // Not a terminal: standard output carries the bytes alone (the progress line is a terminal's).
    const run = await sluice(['export', statement, '--format', 'csv', '--keep', '--parallel', '3']);
    expect(run.code).toBe(0);
    const queryId = await lastQueryOf(statement);
    kept.push(queryId);
    // Several of the suite's 64 KiB segments, given out in their order.
    expect(run.stdout.length).toBeGreaterThan(3 * 64 * 1024);
    expect(Buffer.from(run.stdout).equals(await throughApi(queryId))).toBe(true);
  });

  it('refuses --parallel without --keep, and one that is not a whole number', async () => {
    const alone = await sluice(['export', 'select 1', '--format', 'csv', '--parallel', '2']);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain('--parallel is for a kept result: add --keep');
    const bad = await sluice([
      'export',
      'select 1',
      '--format',
      'csv',
      '--keep',
      '--parallel',
      'x',
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--parallel takes a whole number');
  });
});
