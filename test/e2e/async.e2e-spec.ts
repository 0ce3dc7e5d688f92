import { once } from 'node:events';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import {
  IncomingHttpHeaders,
  IncomingMessage,
  get as httpGet,
  request as httpRequest,
} from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  backendsOf,
  createUser,
  db,
  e2eEnv,
  eventually,
  execute,
  grantSchema,
  holdLock,
  login,
  request,
  slotFillers,
  usersDroppedAfterAll,
} from './support/client';
import { ROOT, freePort } from './support/service';
import { connectTestRedis } from './support/redis';
import { TcpProxy } from '../support/tcp.proxy';

/**
 * Queries that outlive their request: `wait_timeout` (and Prefer) answers 202 with the query's
 * URL when no result is ready in time; the result is kept (SLUICE_RESULT_TTL_SECONDS, 8 s in the
 * suite; SLUICE_RESULT_MAX_BYTES, 1 MiB; SLUICE_RESULT_TOTAL_MAX_BYTES, 2 MiB for all together) and
 * fetched with GET /v1/queries/{id}/result, resumed with `Range: bytes=N-`.
 */
const users = usersDroppedAfterAll();
let token: string;

beforeAll(async () => {
  token = await login();
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
async function submitAsync(
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
  as = token,
) {
  // fetch asks for gzip by itself: say what the body is to be.
  const res = await execute(
    { ...body, wait_timeout: 0 },
    { token: as, headers: { 'accept-encoding': 'identity', ...headers } },
  );
  expect(res.status).toBe(202);
  return res.json.query_id as string;
}

describe('wait_timeout', () => {
  it('answers 202 with the query URL through a proxy that cuts idle connections, and the result is fetched afterwards', async () => {
    const target = new URL(e2eEnv().baseUrl);
    const proxy = new TcpProxy(await freePort(), Number(target.port), 3000);
    await proxy.start();
    // The statements run until the test lets go of this lock: past the proxy's 3 s, and no longer.
    const lock = await holdLock();
    try {
      const viaProxy = `http://127.0.0.1:${proxy.port}`;
      // Without a wait, the statement sends nothing for longer than the proxy allows.
      await expect(
        execute({ statement: `select ${lock.waitOn}, 1 as n` }, { token, baseUrl: viaProxy }),
      ).rejects.toThrow();
      const res = await execute(
        { statement: `select ${lock.waitOn}, 42 as n`, wait_timeout: 1000 },
        { token, baseUrl: viaProxy, headers: { 'accept-encoding': 'identity' } },
      );
      await lock.release();
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
        result_kept_in: e2eEnv().spool === 'redis' ? 'redis' : 'spool',
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
      await lock.release();
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
      expect(past.bytes.length).toBe(0);
      expect(past.headers['content-type']).toBe(whole.headers['content-type']);
      // Past 2^53 too: not read as no Range (200 and the whole body).
      for (const huge of ['9999999999999999', '9'.repeat(40)]) {
        const far = await fetchResult(queryId, { range: `bytes=${huge}-` });
        expect(far.status).toBe(416);
        expect(far.headers['content-range']).toBe(`bytes */${whole.bytes.length}`);
        expect(far.bytes.length).toBe(0);
      }
    },
  );

  it('lets `curl -C -` finish a download cut short in a file', async () => {
    const queryId = await submitAsync({ statement }, { accept: 'text/csv' });
    expect(await finished(queryId)).toMatchObject({ state: 'succeeded' });
    const whole = await fetchResult(queryId);
    const file = join(mkdtempSync(join(tmpdir(), 'sluice-curl-')), 'result.csv');
    try {
      writeFileSync(file, whole.bytes.subarray(0, 1000));
      const curl = spawnSync('curl', [
        ...['--silent', '--show-error', '--fail', '--continue-at', '-', '--output', file],
        ...['--header', `Authorization: Bearer ${token}`],
        `${e2eEnv().baseUrl}/v1/queries/${queryId}/result`,
      ]);
      expect(curl.stderr.toString()).toBe('');
      expect(curl.status).toBe(0);
      expect(readFileSync(file).equals(whole.bytes)).toBe(true);
    } finally {
      rmSync(dirname(file), { recursive: true, force: true });
    }
  });

  it('ignores Range on a query still running (RFC 9110 allows it): 200 with the whole body from its first byte, as it comes', async () => {
    const queryId = await submitAsync(
      {
        statement:
          'select g, pg_sleep(case when g = 3 then 1.5 else 0 end) from generate_series(1, 3) g',
        fetch_size: 1,
      },
      { accept: 'text/csv' },
    );
    const running = await fetchResult(queryId, { range: 'bytes=3-' });
    expect(running.status).toBe(200);
    expect(running.headers['content-range']).toBeUndefined();
    expect(await finished(queryId)).toMatchObject({ state: 'succeeded' });
    const whole = await fetchResult(queryId);
    expect(running.bytes.equals(whole.bytes)).toBe(true);
    // Once it ended, the same Range is honoured.
    const rest = await fetchResult(queryId, { range: 'bytes=3-' });
    expect(rest.status).toBe(206);
    expect(rest.bytes.equals(whole.bytes.subarray(3))).toBe(true);
  });

  it("is 404 for another user's query, an administrator's too, for an unknown id, and for a query that keeps no result", async () => {
    const other = await createUser('async_other');
    users.push(other.username);
    const queryId = await submitAsync({ statement: 'select 1' });
    expect((await fetchResult(queryId, {}, other.token)).status).toBe(404);
    // An administrator sees another user's query, never its data.
    const theirs = await submitAsync({ statement: 'select 1' }, {}, other.token);
    await finished(theirs, other.token);
    expect((await fetchResult(theirs, {}, other.token)).status).toBe(200);
    expect((await fetchResult(theirs)).status).toBe(404);
    expect((await fetchResult('00000000-0000-4000-8000-000000000000')).status).toBe(404);
    const sync = await execute({ statement: 'select 1' }, { token });
    expect((await fetchResult(sync.json.query_id as string)).status).toBe(404);
  });

  it('is gone (410) once its TTL has passed, and so are its Redis keys', async () => {
    const queryId = await submitAsync({ statement: 'select 1 as n' });
    await finished(queryId);
    expect((await fetchResult(queryId)).status).toBe(200);
    // Asked again until the TTL (8 s in the suite) has passed, not slept past it.
    const gone = await eventually(async () => {
      const res = await fetchResult(queryId);
      if (res.status === 200) await new Promise((resolve) => setTimeout(resolve, 250));
      return res.status === 200 ? undefined : res;
    }, 15_000);
    expect(gone.status).toBe(410);
    expect(JSON.parse(gone.bytes.toString()).status.vendor_code).toBe(-113);
    if (e2eEnv().mode === 'cluster') {
      const redis = connectTestRedis();
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

describe('SLUICE_RESULT_TOTAL_MAX_BYTES', () => {
  const CAP = 2 * 1024 * 1024;
  const submitters: string[] = [];

  beforeAll(async () => {
    // Four users of five queries each: SLUICE_MAX_ACTIVE_PER_USER (6) is not what is tested.
    for (let i = 0; i < 4; i++) {
      const user = await createUser('kept_cap');
      users.push(user.username);
      submitters.push(user.token);
    }
  });

  /** Kept bytes as /metrics tells them (the ledger's total, all apis together). */
  async function keptMetric(): Promise<number> {
    const metrics = await fetch(`${e2eEnv().baseUrl}/metrics`).then((res) => res.text());
    return Number(/^sluice_kept_result_bytes\{[^}]*\} (\d+)/m.exec(metrics)?.[1]);
  }

  /**
   * Submits 20 asynchronous CSV queries of `rows` rows of about 500 bytes at once and samples, until
   * they have all ended, what the kept results hold: /metrics, and in cluster mode the memory of
   * their Redis streams. Returns the ids and the largest samples.
   */
  async function submitTwenty(rows: number) {
    const statement = `select g, repeat('x', 500) as pad from generate_series(1, ${rows}) g`;
    const ids = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        submitAsync({ statement }, { accept: 'text/csv' }, submitters[i % submitters.length]),
      ),
    );
    const redis = e2eEnv().mode === 'cluster' ? connectTestRedis() : undefined;
    const streams = ids.map((id) => `${e2eEnv().keyPrefix}:q:{${id}}:out`);
    let maxMetric = 0;
    let maxRedis = 0;
    let done = false;
    const ended = Promise.all(ids.map((id) => finished(id, submitters[ids.indexOf(id) % 4]))).then(
      (infos) => {
        done = true;
        return infos;
      },
    );
    try {
      while (!done) {
        maxMetric = Math.max(maxMetric, await keptMetric());
        if (redis) {
          const sizes = await Promise.all(
            streams.map((key) => redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')),
          );
          maxRedis = Math.max(
            maxRedis,
            sizes.reduce<number>((sum, n) => sum + Number(n ?? 0), 0),
          );
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      const infos = await ended;
      // A query that waited past SLUICE_MAX_QUEUE_WAIT_MS (4 s here: twenty at once on a busy CI
      // machine) never ran, and says nothing of the caps: it is sent again, alone.
      const neverRan = (i: number) => /waited too long in the queue/.test(JSON.stringify(infos[i]));
      for (let i = 0; i < infos.length; i++) {
        for (let tries = 0; tries < 3 && neverRan(i); tries++) {
          const as = submitters[i % submitters.length];
          ids[i] = await submitAsync({ statement }, { accept: 'text/csv' }, as);
          infos[i] = await finished(ids[i], as);
        }
      }
      return { ids, infos, maxMetric, maxRedis, redis };
    } catch (err) {
      redis?.disconnect();
      throw err;
    }
  }

  async function drop(ids: string[]) {
    for (const [i, id] of ids.entries()) {
      await request(undefined, {
        method: 'DELETE',
        path: `/v1/queries/${id}`,
        token: submitters[i % submitters.length],
      });
    }
  }

  it('keeps 20 results that together pass the cap within it: those over it fail with 413 -112 and say to stream them', async () => {
    const { ids, infos, maxMetric, maxRedis, redis } = await submitTwenty(1000);
    try {
      const succeeded = ids.filter((_, i) => infos[i].state === 'succeeded');
      const failed = ids.filter((_, i) => infos[i].state === 'failed');
      // About 500 kB each: a few fit in 2 MiB at once, the rest do not.
      expect(succeeded.length).toBeGreaterThanOrEqual(1);
      expect(succeeded.length).toBeLessThanOrEqual(4);
      expect(failed.length).toBe(20 - succeeded.length);
      expect(maxMetric).toBeLessThanOrEqual(CAP);
      // Stream overhead aside (a few kB per stream), Redis holds no more than the cap.
      if (redis) expect(maxRedis).toBeLessThanOrEqual(CAP + 20 * 16 * 1024);
      let kept = 0;
      for (const [i, id] of ids.entries()) {
        const as = submitters[i % submitters.length];
        const result = await fetchResult(id, {}, as);
        if (infos[i].state === 'succeeded') {
          expect(result.status).toBe(200);
          expect(result.bytes.toString().trim().split('\n')).toHaveLength(1001);
          kept += result.bytes.length;
          continue;
        }
        expect(result.status).toBe(413);
        const body = JSON.parse(result.bytes.toString()) as {
          status: { vendor_code: number; reason: string };
        };
        expect(body.status.vendor_code).toBe(-112);
        expect(body.status.reason).toContain('SLUICE_RESULT_TOTAL_MAX_BYTES');
        expect(body.status.reason).toContain('without wait_timeout');
        // A failed result keeps only its error: its bytes went back to the total.
        if (redis) expect(await redis.xlen(`${e2eEnv().keyPrefix}:q:{${id}}:out`)).toBe(1);
      }
      expect(kept).toBeLessThanOrEqual(CAP);
      const before = await keptMetric();
      expect(before).toBeGreaterThanOrEqual(kept);
      // Dropped results give their bytes back: the next result fits again.
      await drop(ids);
      expect(await keptMetric()).toBeLessThanOrEqual(before - kept);
      const next = await submitAsync(
        { statement: "select g, repeat('x', 500) from generate_series(1, 1000) g" },
        { accept: 'text/csv' },
      );
      expect(await finished(next)).toMatchObject({ state: 'succeeded' });
      await drop([next]);
    } finally {
      redis?.disconnect();
    }
  }, 60_000);

  it('keeps 20 results each larger than the cap within it: every one fails with 413 -112', async () => {
    const { ids, infos, maxMetric, maxRedis, redis } = await submitTwenty(5000);
    try {
      expect(infos.map((info) => info.state)).toEqual(ids.map(() => 'failed'));
      expect(maxMetric).toBeLessThanOrEqual(CAP);
      if (redis) expect(maxRedis).toBeLessThanOrEqual(CAP + 20 * 16 * 1024);
      for (const [i, id] of ids.entries()) {
        const result = await fetchResult(id, {}, submitters[i % submitters.length]);
        expect(result.status).toBe(413);
        expect(JSON.parse(result.bytes.toString())).toMatchObject({
          status: { vendor_code: -112 },
        });
      }
      await drop(ids);
    } finally {
      redis?.disconnect();
    }
  }, 60_000);
});

describe("a kept query's slot", () => {
  it('counts detached queries against SLUICE_MAX_ACTIVE_PER_USER until they end, not for one slot lease', async () => {
    // The e2e service runs with SLUICE_MAX_ACTIVE_PER_USER=6, 2 queries of one user at once: 2 of
    // the 6 run, 4 wait (past their 4 s queue wait: they never run, and end when a worker gets to
    // them — at once on Redis, where a waiting job is taken again every 250 ms).
    const attacker = await createUser('kept_slots');
    users.push(attacker.username);
    const asAttacker = (statement: string) =>
      execute(
        { statement, wait_timeout: 0 },
        { token: attacker.token, headers: { 'accept-encoding': 'identity' } },
      );
    const long = 'select pg_sleep(25)';
    const first = await Promise.all(Array.from({ length: 8 }, () => asAttacker(long)));
    const accepted = first.filter((r) => r.status === 202).map((r) => r.json.query_id as string);
    expect(accepted).toHaveLength(6);
    for (const refused of first.filter((r) => r.status !== 202)) {
      expect(refused.status).toBe(429);
      expect(refused.json.status).toMatchObject({ vendor_code: -108 });
    }
    const submitted = Date.now();
    try {
      // Past one slot lease after the last api let go of them: the slots are still held. In one
      // process there is no lease (nothing to renew, no release to lose): a moment is enough.
      const lease = e2eEnv().mode === 'cluster' ? e2eEnv().slotLeaseMs + 1_500 : 1_000;
      await new Promise((r) => setTimeout(r, lease - (Date.now() - submitted)));
      const list = await request(undefined, {
        method: 'GET',
        path: '/v1/queries',
        token: attacker.token,
      });
      const open = (list.json as { query_id: string; state: string }[]).filter((q) =>
        ['queued', 'running', 'streaming'].includes(q.state),
      );
      expect(open.length).toBeGreaterThanOrEqual(e2eEnv().userSlots);
      expect(open.length).toBeLessThanOrEqual(6);
      // Room for exactly the ones that ended: the open ones still hold theirs.
      const free = 6 - open.length;
      const again = await Promise.all(Array.from({ length: free + 1 }, () => asAttacker(long)));
      const more = again.filter((r) => r.status === 202).map((r) => r.json.query_id as string);
      accepted.push(...more);
      expect(more).toHaveLength(free);
      expect(again.filter((r) => r.status === 429)).toHaveLength(1);
    } finally {
      for (const id of accepted) {
        await request(undefined, {
          method: 'DELETE',
          path: `/v1/queries/${id}`,
          token: attacker.token,
        });
      }
    }
    // DELETE stops them where they run (also in-process, where the cancel goes through the kept
    // channel that DELETE drops).
    await eventually(async () => {
      const running = await Promise.all(accepted.map((id) => backendsOf(id)));
      return running.every((n) => n === 0) ? true : undefined;
    }, 10_000);
    // Ended (cancelled): the slots are free again.
    await eventually(async () => {
      const res = await execute({ statement: 'select 1 as ok' }, { token: attacker.token });
      return res.status === 200 ? true : undefined;
    }, 15_000);
  }, 60_000);
});

describe('a kept query that never starts', () => {
  it('answers its fetch within the queue-wait limit with the error the synchronous path gives (504 TIME_LIMIT), and keeps that error', async () => {
    const filler = await slotFillers('kept_filler');
    users.push(...filler.users.map((u) => u.username));
    const { capacity } = e2eEnv();
    const fillers: { id: string; token: string }[] = [];
    try {
      for (let i = 0; i < capacity; i++) {
        const as = filler.tokenFor(i);
        fillers.push({
          id: await submitAsync({ statement: 'select pg_sleep(20)' }, {}, as),
          token: as,
        });
      }
      await eventually(async () => {
        const states = await Promise.all(
          fillers.map(async ({ id, token: as }) => {
            const res = await request(undefined, {
              method: 'GET',
              path: `/v1/queries/${id}`,
              token: as,
            });
            return (res.json as { state: string }).state;
          }),
        );
        return states.every((state) => state === 'running') ? true : undefined;
      });
      const queryId = await submitAsync({ statement: 'select 1 as never' });
      const asked = Date.now();
      const res = await fetchResult(queryId);
      // SLUICE_MAX_QUEUE_WAIT_MS is 4 s in the suite; the check runs on a quiet spell (3 s).
      expect(Date.now() - asked).toBeLessThan(9_000);
      expect(res.status).toBe(504);
      expect(JSON.parse(res.bytes.toString())).toMatchObject({
        status: { vendor_code: -1122, reason: expect.stringContaining('queue') as string },
      });
      expect(await finished(queryId)).toMatchObject({
        state: 'failed',
        status: { vendor_code: -1122 },
      });
      // Never run, and the next fetch answers the same at once.
      const again = await fetchResult(queryId);
      expect(again.status).toBe(504);
    } finally {
      for (const { id, token: as } of fillers) {
        await request(undefined, { method: 'DELETE', path: `/v1/queries/${id}`, token: as });
      }
    }
  }, 40_000);
});

describe('progress of a query nobody reads', () => {
  it('shows rows_produced and bytes_produced growing while an asynchronous query runs, and all of them at its end', async () => {
    const queryId = await submitAsync({
      // One row every 0.25 s, one row per batch: about 5 s in all.
      statement: 'select g, pg_sleep(0.25) from generate_series(1, 20) g',
      fetch_size: 1,
    });
    const seen: { rows: number; bytes: number }[] = [];
    for (;;) {
      const res = await request(undefined, {
        method: 'GET',
        path: `/v1/queries/${queryId}`,
        token,
      });
      const info = res.json as {
        state: string;
        rows: number;
        rows_produced: number;
        bytes_produced: number;
      };
      if (['succeeded', 'failed', 'cancelled'].includes(info.state)) {
        expect(info).toMatchObject({ state: 'succeeded', rows_produced: 20 });
        expect(info.bytes_produced).toBeGreaterThan(0);
        break;
      }
      // Nobody reads it: nothing is sent, rows are made all the same.
      expect(info.rows).toBe(0);
      seen.push({ rows: info.rows_produced, bytes: info.bytes_produced });
      await new Promise((r) => setTimeout(r, 200));
    }
    const rows = [...new Set(seen.map((s) => s.rows))];
    // At least three reports before the end (one a second), each larger than the one before.
    expect(rows.filter((n) => n > 0 && n < 20).length).toBeGreaterThanOrEqual(3);
    expect([...rows].sort((a, b) => a - b)).toEqual(rows);
    const bytes = seen.map((s) => s.bytes);
    expect([...bytes].sort((a, b) => a - b)).toEqual(bytes);
  }, 30_000);
});

describe('progress of a query whose client does not read', () => {
  it('shows the rows made while they wait for the client: a result made at once is not "0 rows made"', async () => {
    // One batch of about 30 MB: more than the stream's window and the sockets hold, so the worker
    // waits on this client, which reads nothing (the suite cancels it after 3 s of that).
    const req = httpRequest(new URL('/v1/execute', e2eEnv().baseUrl), {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'text/csv',
        authorization: `Bearer ${token}`,
      },
    });
    req.end(
      JSON.stringify({
        statement: "select g, repeat('x', 10000) as pad from generate_series(1, 3000) g",
        fetch_size: 3000,
      }),
    );
    const [res] = (await once(req, 'response')) as [IncomingMessage];
    res.pause();
    try {
      const queryId = res.headers['x-query-id'] as string;
      expect(queryId).toBeDefined();
      let info: { state?: string; rows_produced?: number } = {};
      // A report is due a second after the start: look for it while the query streams, that is
      // until the idle cancel ends it (bounded, should that never come).
      for (const until = Date.now() + 10_000; Date.now() < until;) {
        info = (await request(undefined, { method: 'GET', path: `/v1/queries/${queryId}`, token }))
          .json as typeof info;
        // Both: the report can come a moment before the state changes from running.
        if (info.rows_produced === 3000 && info.state === 'streaming') break;
        if (info.state === 'succeeded' || info.state === 'failed' || info.state === 'cancelled') {
          break;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(info).toMatchObject({ state: 'streaming', rows_produced: 3000 });
    } finally {
      res.destroy();
    }
  }, 30_000);
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
    // The repeats were never queries: only the first is listed.
    const list = await request(undefined, { method: 'GET', path: '/v1/queries', token });
    const listed = (list.json as { query_id: string; statement: string }[]).filter(
      (q) => q.statement === insert.statement,
    );
    expect(listed.map((q) => q.query_id)).toEqual([...ids]);
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

  it('refuses a key that is not 1 to 255 visible ASCII characters with 400, and runs nothing', async () => {
    const statement = `insert into ${schema}.t values (255)`;
    for (const key of ['', 'k'.repeat(256), 'two words', 'caf\u00e9']) {
      const res = await execute({ statement }, withKey(key));
      expect(res.status).toBe(400);
      expect(res.json.status).toMatchObject({ sql_state: '08P01', vendor_code: -100 });
      expect(res.json.status.reason).toMatch(/Idempotency-Key/);
      expect(res.json.query_id).toBeUndefined();
    }
    const { rows } = await db().query<{ n: number }>(
      `select count(*)::int as n from ${schema}.t where n = 255`,
    );
    expect(rows[0].n).toBe(0);
    const longest = await execute({ statement: 'select 1 as a' }, withKey('k'.repeat(255)));
    expect(longest.status).toBe(200);
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
