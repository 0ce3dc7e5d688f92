import { spawnSync } from 'node:child_process';
import { IncomingHttpHeaders, get as httpGet, request as httpRequest } from 'node:http';
import Redis from 'ioredis';
import {
  backendsOf,
  closeDb,
  createUser,
  db,
  dropUser,
  e2eEnv,
  eventually,
  execute,
  grantSchema,
  login,
  request,
} from './support/client';
import { ROOT, freePort } from './support/service';
import { TcpProxy } from './support/tcp.proxy';

/**
 * Queries that outlive their request: `wait_timeout` (and Prefer) answers 202 with the query's
 * URL when no result is ready in time; the result is kept (SLUICE_RESULT_TTL_SECONDS, 8 s in the
 * suite; SLUICE_RESULT_MAX_BYTES, 1 MiB) and fetched with GET /v1/queries/{id}/result, resumed
 * with `Range: bytes=N-`.
 */
const users: string[] = [];
let token: string;

beforeAll(async () => {
  token = await login();
});

afterAll(async () => {
  for (const name of users) await dropUser(name);
  await closeDb();
});

const QUERY_ID = /^[0-9a-f-]{36}$/;

/** The rows a Parquet file says it holds, read by hyparquet (ESM-only: in a node process). */
function parquetRows(file: Buffer): number {
  const reader = `
    const { parquetMetadata } = require('hyparquet');
    const data = require('node:fs').readFileSync(0);
    const meta = parquetMetadata(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
    process.stdout.write(String(meta.num_rows));`;
  const run = spawnSync(process.execPath, ['-e', reader], { cwd: ROOT, input: file });
  if (run.status !== 0) throw new Error(`hyparquet: ${run.stderr.toString()}`);
  return Number(run.stdout.toString());
}

/** The query's info once it is in a final state. */
async function finished(queryId: string, as = token): Promise<Record<string, unknown>> {
  return eventually(async () => {
    const res = await request(undefined, {
      method: 'GET',
      path: `/v1/queries/${queryId}`,
      token: as,
    });
    const state = (res.json as { state?: string } | undefined)?.state;
    return state && ['succeeded', 'failed', 'cancelled'].includes(state)
      ? (res.json as Record<string, unknown>)
      : undefined;
  }, 20_000);
}

/** GET …/result as the raw bytes sent (never decompressed), with the response's headers. */
async function fetchResult(
  queryId: string,
  headers: Record<string, string> = {},
  as = token,
): Promise<{ status: number; headers: IncomingHttpHeaders; bytes: Buffer }> {
  const url = new URL(`${e2eEnv().baseUrl}/v1/queries/${queryId}/result`);
  return new Promise((resolve, reject) => {
    httpGet(url, { headers: { authorization: `Bearer ${as}`, ...headers } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (part: Buffer) => parts.push(part));
      res.on('end', () =>
        resolve({ status: res.statusCode!, headers: res.headers, bytes: Buffer.concat(parts) }),
      );
      res.on('error', reject);
    }).on('error', reject);
  });
}

/** An asynchronous query that is answered 202 at once; returns its id. */
async function submitAsync(body: Record<string, unknown>, headers: Record<string, string> = {}) {
  // fetch asks for gzip by itself: say what the body is to be.
  const res = await execute(
    { ...body, wait_timeout: 0 },
    { token, headers: { 'accept-encoding': 'identity', ...headers } },
  );
  expect(res.status).toBe(202);
  return res.json.query_id as string;
}

describe('wait_timeout', () => {
  it('answers 202 with the query URL through a proxy that cuts idle connections, and the result is fetched afterwards', async () => {
    const target = new URL(e2eEnv().baseUrl);
    const proxy = new TcpProxy(await freePort(), Number(target.port), 3000);
    await proxy.start();
    try {
      const viaProxy = `http://127.0.0.1:${proxy.port}`;
      // Without a wait, the 6 s statement sends nothing for longer than the proxy allows.
      await expect(
        execute({ statement: 'select pg_sleep(6), 1 as n' }, { token, baseUrl: viaProxy }),
      ).rejects.toThrow();
      const res = await execute(
        { statement: 'select pg_sleep(6), 42 as n', wait_timeout: 1000 },
        { token, baseUrl: viaProxy, headers: { 'accept-encoding': 'identity' } },
      );
      expect(res.status).toBe(202);
      const queryId = res.json.query_id as string;
      expect(queryId).toMatch(QUERY_ID);
      expect(res.headers.get('location')).toBe(`/v1/queries/${queryId}`);
      expect(res.json).toMatchObject({
        state: expect.stringMatching(/^(queued|running)$/),
        links: { self: `/v1/queries/${queryId}`, result: `/v1/queries/${queryId}/result` },
        status: { sql_state: '00000', vendor_code: 0 },
      });
      const info = await finished(queryId);
      expect(info).toMatchObject({
        state: 'succeeded',
        result_url: `/v1/queries/${queryId}/result`,
        result_kept_until: expect.any(String),
      });
      const result = await fetchResult(queryId);
      expect(result.status).toBe(200);
      const body = JSON.parse(result.bytes.toString()) as Record<string, unknown>;
      expect(body).toMatchObject({
        query_id: queryId,
        data: [['', 42]],
        status: { sql_state: '00000', vendor_code: 0 },
      });
    } finally {
      await proxy.stop();
    }
  });

  it('streams a result that is still being made, from its first byte', async () => {
    const queryId = await submitAsync(
      {
        statement:
          'select g, pg_sleep(case when g = 3 then 2 else 0 end) from generate_series(1, 3) g',
        fetch_size: 1,
      },
      { accept: 'application/stream+json' },
    );
    const result = await fetchResult(queryId);
    expect(result.status).toBe(200);
    expect(result.headers['content-type']).toContain('application/stream+json');
    const lines = result.bytes
      .toString()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { data: unknown[][] });
    expect(lines[0]).toMatchObject({ query_id: queryId });
    expect(lines.slice(1, -1).flatMap((l) => l.data.map((r) => r[0]))).toEqual([1, 2, 3]);
    expect(lines[lines.length - 1]).toMatchObject({ status: { sql_state: '00000' } });
  });

  it('answers the result itself when it comes within the wait', async () => {
    const res = await execute({ statement: 'select 7 as n', wait_timeout: 5000 }, { token });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ data: [[7]], status: { vendor_code: 0 } });
  });

  it('with on_wait_timeout cancel: cancels the query and says so; no backend is left running', async () => {
    const res = await execute(
      { statement: 'select pg_sleep(30)', wait_timeout: 500, on_wait_timeout: 'cancel' },
      { token },
    );
    expect(res.status).toBe(409);
    expect(res.json.status).toMatchObject({ vendor_code: -900, sql_state: '57014' });
    expect(res.json.status.reason).toContain('wait_timeout');
    const queryId = res.json.query_id as string;
    await eventually(async () => ((await backendsOf(queryId)) === 0 ? true : undefined));
    expect(await finished(queryId)).toMatchObject({ state: 'cancelled' });
  });

  it('takes Prefer: respond-async and Prefer: wait=N (RFC 7240)', async () => {
    const now = await execute(
      { statement: 'select pg_sleep(1)' },
      { token, headers: { prefer: 'respond-async' } },
    );
    expect(now.status).toBe(202);
    const waited = Date.now();
    const later = await execute(
      { statement: 'select pg_sleep(3)' },
      { token, headers: { prefer: 'respond-async, wait=1' } },
    );
    expect(later.status).toBe(202);
    expect(Date.now() - waited).toBeGreaterThanOrEqual(900);
  });

  it('refuses a bad wait_timeout or on_wait_timeout with 400', async () => {
    for (const body of [
      { statement: 'select 1', wait_timeout: -1 },
      { statement: 'select 1', wait_timeout: 'soon' },
      { statement: 'select 1', wait_timeout: 1000, on_wait_timeout: 'later' },
      { statement: 'select 1', on_wait_timeout: 'cancel' },
    ]) {
      const res = await execute(body, { token });
      expect(res.status).toBe(400);
      expect(res.json.status.vendor_code).toBe(-100);
    }
  });
});

describe('GET /v1/queries/{id}/result', () => {
  const statement = 'select g, md5(g::text) as h from generate_series(1, 3000) g';

  it.each([
    ['text/csv', {}],
    ['application/stream+json', {}],
    ['application/json', { 'accept-encoding': 'gzip' }],
    ['application/parquet', {}],
  ])(
    'resumes a %s download cut at any byte with Range: the bytes are exactly those of an uncut one',
    async (accept, extra) => {
      const queryId = await submitAsync({ statement }, { accept, ...extra });
      expect(await finished(queryId)).toMatchObject({ state: 'succeeded' });
      const whole = await fetchResult(queryId);
      expect(whole.status).toBe(200);
      expect(whole.headers['accept-ranges']).toBe('bytes');
      if (accept === 'application/parquet') {
        expect(parquetRows(whole.bytes)).toBe(3000);
      }
      for (const k of [1, Math.floor(whole.bytes.length / 2), whole.bytes.length - 1]) {
        const rest = await fetchResult(queryId, { range: `bytes=${k}-` });
        expect(rest.status).toBe(206);
        expect(rest.headers['content-range']).toBe(
          `bytes ${k}-${whole.bytes.length - 1}/${whole.bytes.length}`,
        );
        expect(Buffer.concat([whole.bytes.subarray(0, k), rest.bytes]).equals(whole.bytes)).toBe(
          true,
        );
      }
      const past = await fetchResult(queryId, { range: `bytes=${whole.bytes.length}-` });
      expect(past.status).toBe(416);
      expect(past.headers['content-range']).toBe(`bytes */${whole.bytes.length}`);
    },
  );

  it("is 404 for another user's query, for an unknown id, and for a query that keeps no result", async () => {
    const other = await createUser('async_other');
    users.push(other.username);
    const queryId = await submitAsync({ statement: 'select 1' });
    expect((await fetchResult(queryId, {}, other.token)).status).toBe(404);
    expect((await fetchResult('00000000-0000-4000-8000-000000000000')).status).toBe(404);
    const sync = await execute({ statement: 'select 1' }, { token });
    expect((await fetchResult(sync.json.query_id as string)).status).toBe(404);
  });

  it('is gone (410) once its TTL has passed, and so are its Redis keys', async () => {
    const queryId = await submitAsync({ statement: 'select 1 as n' });
    await finished(queryId);
    expect((await fetchResult(queryId)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 9_000));
    const gone = await fetchResult(queryId);
    expect(gone.status).toBe(410);
    expect(JSON.parse(gone.bytes.toString()).status.vendor_code).toBe(-113);
    if (e2eEnv().mode === 'cluster') {
      const redis = new Redis(e2eEnv().redisUrl);
      try {
        expect(await redis.exists(`${e2eEnv().keyPrefix}:q:{${queryId}}:out`)).toBe(0);
      } finally {
        redis.disconnect();
      }
    }
  }, 30_000);

  it('is counted in /metrics while kept', async () => {
    const queryId = await submitAsync({ statement: 'select g from generate_series(1, 100) g' });
    await finished(queryId);
    const metrics = await fetch(`${e2eEnv().baseUrl}/metrics`).then((res) => res.text());
    const count = /^sluice_kept_results\{[^}]*state="succeeded"[^}]*\} (\d+)/m.exec(metrics);
    const bytes = /^sluice_kept_result_bytes\{[^}]*\} (\d+)/m.exec(metrics);
    expect(Number(count?.[1])).toBeGreaterThanOrEqual(1);
    expect(Number(bytes?.[1])).toBeGreaterThan(0);
  });

  it('is dropped by DELETE /v1/queries/{id}', async () => {
    const queryId = await submitAsync({ statement: 'select 1 as n' });
    await finished(queryId);
    const deleted = await request(undefined, {
      method: 'DELETE',
      path: `/v1/queries/${queryId}`,
      token,
    });
    expect(deleted.status).toBe(200);
    expect((await fetchResult(queryId)).status).toBe(410);
  });

  it('fails a result larger than SLUICE_RESULT_MAX_BYTES and says to stream it instead', async () => {
    const queryId = await submitAsync({
      statement: "select g, repeat('x', 1000) from generate_series(1, 3000) g",
    });
    const info = await finished(queryId);
    expect(info).toMatchObject({ state: 'failed', status: { vendor_code: -112 } });
    expect((info.status as { reason: string }).reason).toContain('without wait_timeout');
    const result = await fetchResult(queryId);
    const body = JSON.parse(result.bytes.toString()) as { status: { vendor_code: number } };
    expect(body.status.vendor_code).toBe(-112);
  });
});

describe('Idempotency-Key', () => {
  const schema = `idem_${Date.now().toString(36)}`;

  beforeAll(async () => {
    await db().query(`create schema ${schema}; create table ${schema}.t (n int)`);
    await grantSchema(schema);
  });

  afterAll(async () => {
    await db().query(`drop schema if exists ${schema} cascade`);
  });

  const insert = {
    statement: `insert into ${schema}.t select 1 from pg_sleep(1.5)`,
  };
  const withKey = (key: string) => ({
    token,
    headers: { 'idempotency-key': key, 'accept-encoding': 'identity' },
  });

  it('runs an INSERT sent three times (once while it runs, twice after) once; every answer is its result', async () => {
    const key = `insert-${Date.now()}`;
    const first = execute(insert, withKey(key));
    await new Promise((resolve) => setTimeout(resolve, 500));
    const whileRunning = await execute(insert, withKey(key));
    const answers = [await first, whileRunning];
    answers.push(await execute(insert, withKey(key)));
    answers.push(await execute(insert, withKey(key)));
    const ids = new Set(answers.map((a) => a.json.query_id as string));
    expect(ids.size).toBe(1);
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      expect(answer.json.status).toMatchObject({ reason: 'INSERT 0 1', vendor_code: 0 });
    }
    const { rows } = await db().query<{ n: number }>(`select count(*)::int as n from ${schema}.t`);
    expect(rows[0].n).toBe(1);
  });

  it('answers 422 for the same key with another request, and runs nothing', async () => {
    const key = `conflict-${Date.now()}`;
    expect((await execute({ statement: 'select 1 as a' }, withKey(key))).status).toBe(200);
    for (const other of [
      { statement: 'select 2 as a' },
      { statement: 'select 1 as a', format: 'collection' },
    ]) {
      const res = await execute(other, withKey(key));
      expect(res.status).toBe(422);
      expect(res.json.status).toMatchObject({ vendor_code: -114 });
    }
  });

  it("keeps one user's keys apart from another's", async () => {
    const other = await createUser('idem_other');
    users.push(other.username);
    const key = `shared-${Date.now()}`;
    const mine = await execute({ statement: 'select 1 as a' }, withKey(key));
    const theirs = await execute(
      { statement: 'select 2 as a' },
      { token: other.token, headers: { 'idempotency-key': key } },
    );
    expect(theirs.status).toBe(200);
    expect(theirs.json.query_id).not.toBe(mine.json.query_id);
  });

  it('refuses a malformed key with 400', async () => {
    const res = await execute({ statement: 'select 1' }, withKey('has space'));
    expect(res.status).toBe(400);
  });
});

describe('resumable', () => {
  it('keeps a synchronous download the client lost, runs it to its end, and resumes it with Range', async () => {
    const url = new URL(`${e2eEnv().baseUrl}/v1/execute`);
    const body = JSON.stringify({
      // The last row comes a second late: the client is gone while the statement still runs.
      statement:
        'select g, md5(g::text), pg_sleep(case when g = 20000 then 1 else 0 end)::text as s from generate_series(1, 20000) g',
      resumable: true,
      fetch_size: 500,
    });
    // Read the first bytes of the response, then cut the connection.
    const { queryId, head } = await new Promise<{ queryId: string; head: Buffer }>(
      (resolve, reject) => {
        const req = httpRequest(
          url,
          {
            method: 'POST',
            headers: {
              authorization: `Bearer ${token}`,
              'content-type': 'application/json',
              accept: 'text/csv',
            },
          },
          (res) => {
            res.once('data', (chunk: Buffer) => {
              req.destroy();
              resolve({ queryId: res.headers['x-query-id'] as string, head: chunk });
            });
          },
        );
        req.on('error', () => undefined);
        req.once('error', reject);
        req.end(body);
      },
    );
    expect(await finished(queryId)).toMatchObject({ state: 'succeeded' });
    const whole = await fetchResult(queryId);
    expect(whole.bytes.toString().trim().split('\n')).toHaveLength(20001);
    const rest = await fetchResult(queryId, { range: `bytes=${head.length}-` });
    expect(rest.status).toBe(206);
    expect(Buffer.concat([head, rest.bytes]).equals(whole.bytes)).toBe(true);
  });

  it('refuses a resumable that is not a boolean', async () => {
    const res = await execute({ statement: 'select 1', resumable: 'yes' }, { token });
    expect(res.status).toBe(400);
  });
});
