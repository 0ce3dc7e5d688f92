import { brotliDecompressSync, createGunzip, gunzipSync } from 'node:zlib';
import {
  applicationNameOf,
  db,
  closeDb,
  e2eEnv,
  execute,
  login,
  request,
  until,
} from './support/client';
import { open, readAll, readUntil } from './support/raw';
import { connectTestRedis } from './support/redis';

// About 60 MB as NDJSON: more than every buffer between the worker and the client.
const BIG = 'select g, repeat(md5(g::text), 8) as h from generate_series(1, 200000) g';

afterAll(closeDb);

function lines(text: string): Record<string, unknown>[] {
  return text
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('streamed responses', () => {
  it('sends the first stream+json rows before the statement finishes', async () => {
    const started = Date.now();
    const res = await open(
      {
        statement:
          'select g, case when g = 101 then pg_sleep(1.5) end as s from generate_series(1, 200) g',
        fetch_size: 100,
      },
      { accept: 'application/stream+json' },
    );
    const first = await readUntil(res, (b) => b.toString().split('\n').length > 2);
    const firstAt = Date.now() - started;
    expect(lines(first.toString().split('\n').slice(0, 2).join('\n'))[1]).toMatchObject({
      data: expect.any(Array),
    });
    res.resume();
    const rest = await readAll(res);
    const doneAt = Date.now() - started;
    const all = lines(first.toString() + rest.toString());
    expect(all[all.length - 1]).toMatchObject({ status: { sql_state: '00000', row_count: 200 } });
    expect(doneAt - firstAt).toBeGreaterThan(1000);
  });

  it('ends a stream+json response that fails mid-way with exactly one error status line', async () => {
    const res = await execute(
      {
        statement: 'select 1 / (5000 - g) as x from generate_series(1, 10000) g',
        fetch_size: 1000,
      },
      { headers: { accept: 'application/stream+json' } },
    );
    expect(res.status).toBe(200);
    const all = lines(res.text);
    const statuses = all.filter((l) => 'status' in l);
    expect(statuses).toEqual([
      { status: expect.objectContaining({ sql_state: '22012', vendor_code: -520 }) },
    ]);
    expect(all[all.length - 1]).toBe(statuses[0]);
  });

  it('writes RFC 4180 CSV with a header for text/csv', async () => {
    const res = await execute(
      {
        statement: `select 1 as n, 'a,b' as s, null::text as z, '' as e, true as b, 'say "hi"' as q`,
      },
      { headers: { accept: 'text/csv' } },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(res.text).toBe('n,s,z,e,b,q\r\n1,"a,b",,"",true,"say ""hi"""\r\n');
  });

  it('cuts the connection when a CSV response fails mid-way, so it cannot pass for a whole file', async () => {
    const res = await open(
      {
        statement: 'select 1 / (5000 - g) as x from generate_series(1, 10000) g',
        fetch_size: 1000,
      },
      { accept: 'text/csv' },
    );
    expect(res.statusCode).toBe(200);
    await expect(readAll(res)).rejects.toThrow(/cut short|aborted/);
  });

  it('refuses an Accept it cannot produce with 406', async () => {
    const res = await execute(
      { statement: 'select 1' },
      { headers: { accept: 'application/xml, text/html' } },
    );
    expect(res.status).toBe(406);
    expect(res.json.status.vendor_code).toBe(-105);
  });
});

describe('compressed responses', () => {
  it.each([
    ['gzip', '1'],
    ['gzip', '5'],
    ['gzip', '9'],
    ['br', '1'],
    ['br', '5'],
    ['br', '9'],
  ])('returns the same JSON compressed with %s level %s', async (encoding, level) => {
    const res = await open(
      { statement: "select g, 'the same text on every row' as h from generate_series(1, 20000) g" },
      {
        'accept-encoding': 'gzip, br',
        'preferred-encoding': encoding,
        'preferred-compression-level': level,
      },
    );
    expect(res.headers['content-encoding']).toBe(encoding);
    const body = await readAll(res);
    const plain = encoding === 'gzip' ? gunzipSync(body) : brotliDecompressSync(body);
    const json = JSON.parse(plain.toString()) as {
      data: unknown[][];
      status: { row_count: number };
    };
    expect(json.data).toHaveLength(20000);
    expect(json.data[19999]).toEqual([20000, 'the same text on every row']);
    expect(body.length).toBeLessThan(plain.length / 4);
  });

  it('streams compressed output: the first rows decompress before the statement finishes', async () => {
    const started = Date.now();
    const res = await open(
      {
        statement:
          'select g, case when g = 101 then pg_sleep(1.5) end as s from generate_series(1, 200) g',
        fetch_size: 100,
      },
      { accept: 'application/stream+json', 'accept-encoding': 'gzip' },
    );
    expect(res.headers['content-encoding']).toBe('gzip');
    const gunzip = createGunzip();
    let text = '';
    gunzip.on('data', (d: Buffer) => (text += d.toString()));
    res.pipe(gunzip);
    while (text.split('\n').length < 3) await new Promise((r) => setTimeout(r, 10));
    const firstAt = Date.now() - started;
    await new Promise((r) => gunzip.on('end', r));
    expect(Date.now() - started - firstAt).toBeGreaterThan(1000);
    expect(lines(text).pop()).toMatchObject({ status: { row_count: 200 } });
  });

  it('does not compress without Accept-Encoding, even with Preferred-Encoding', async () => {
    const res = await execute(
      { statement: 'select 1 as one' },
      { headers: { 'preferred-encoding': 'br' } },
    );
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([[1]]);
  });

  it.each(['0', '10', 'high'])('refuses Preferred-Compression-Level %s with 400', async (level) => {
    const res = await execute(
      { statement: 'select 1' },
      { headers: { 'accept-encoding': 'gzip', 'preferred-compression-level': level } },
    );
    expect(res.status).toBe(400);
    expect(res.json.status.reason).toMatch(/Preferred-Compression-Level/);
  });
});

describe('flow control', () => {
  it('holds the producer while the client does not read, then delivers everything', async () => {
    const res = await open(
      { statement: BIG, fetch_size: 1000 },
      { accept: 'application/stream+json' },
    );
    const head = await readUntil(res, (b) => b.length > 0);
    await new Promise((r) => setTimeout(r, 1500));
    const env = e2eEnv();
    const queryId = (JSON.parse(head.toString().split('\n')[0]) as { query_id: string }).query_id;
    if (env.mode === 'cluster') {
      const redis = connectTestRedis();
      const length = await redis.xlen(`${env.keyPrefix}:q:{${queryId}}:out`);
      redis.disconnect();
      // The window is 16 chunks; the api holds a few more in its socket buffers, never the result.
      expect(length).toBeGreaterThan(0);
      expect(length).toBeLessThanOrEqual(16);
    }
    // The statement is held open, mid-result, rather than run to the end into memory.
    const { rows } = await db().query<{ n: number }>(
      'select count(*)::int as n from pg_stat_activity where application_name = $1',
      [applicationNameOf(queryId)],
    );
    expect(rows[0].n).toBe(1);
    // Every api shows it as streaming, with the rows sent so far.
    const info = await request(undefined, {
      method: 'GET',
      path: `/v1/queries/${queryId}`,
      token: await login(),
    });
    expect(info.json).toMatchObject({ state: 'streaming', rows: expect.any(Number) });
    expect(info.json.rows).toBeGreaterThan(0);
    res.resume();
    const rest = await readAll(res);
    const all = lines(head.toString() + rest.toString());
    expect(all.pop()).toMatchObject({ status: { row_count: 200000 } });
    expect(all.slice(1).reduce((n, l) => n + (l.data as unknown[]).length, 0)).toBe(200000);
    if (env.mode === 'cluster') {
      const redis = connectTestRedis();
      // Nothing of the query stays in Redis once its response is sent.
      expect(await redis.exists(`${env.keyPrefix}:q:{${queryId}}:out`)).toBe(0);
      redis.disconnect();
    }
  });

  it('cancels the statement of a client that stops reading for longer than the idle time', async () => {
    const res = await open(
      { statement: BIG, fetch_size: 1000 },
      { accept: 'application/stream+json' },
    );
    const head = await readUntil(res, (b) => b.length > 0);
    const queryId = (JSON.parse(head.toString().split('\n')[0]) as { query_id: string }).query_id;
    // The e2e service runs with SLUICE_CLIENT_IDLE_TIMEOUT_MS=3000; socket buffers let the
    // producer go on a little after the client stops. Its final status (below) says that the
    // statement was cancelled, not that it ended.
    const running = async () => {
      const { rows } = await db().query<{ n: number }>(
        'select count(*)::int as n from pg_stat_activity where application_name = $1',
        [applicationNameOf(queryId)],
      );
      return rows[0].n;
    };
    await until(async () => (await running()) === 0, 10_000);
    res.resume();
    const all = lines(head.toString() + (await readAll(res)).toString());
    expect(all.pop()).toEqual({
      status: expect.objectContaining({ sql_state: '57014', vendor_code: -900 }),
    });
  });
});
