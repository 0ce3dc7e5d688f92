import { randomUUID } from 'node:crypto';
import { IncomingMessage, get } from 'node:http';
import {
  HttpResult,
  createUser,
  dropUser,
  e2eEnv,
  eventually,
  execute,
  login,
  request,
} from './support/client';
import { deployment, firstAnswer, startWorker } from './support/lanes';
import { readAll, readUntil } from './support/raw';

/**
 * The registry keeps the records of at most SLUICE_QUERY_RETENTION_COUNT finished queries,
 * besides open queries and kept results: an older one is no longer known (404). In a deployment
 * of its own, so that its small count never touches the suite's other queries.
 */
const stops: (() => Promise<unknown>)[] = [];

afterAll(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

jest.setTimeout(90_000);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Trims every half second (SLUICE_RETENTION_TRIM_INTERVAL_MS): the loops below wait 5 s at most. */
const TRIM_MS = 500;
const TRIES = 10;

/** A deployment of its own with `env`, and how to run a query on it and look one up. */
async function deployed(env: Record<string, string>) {
  const trimEvery = { SLUICE_RETENTION_TRIM_INTERVAL_MS: String(TRIM_MS) };
  const { api, prefix } = await deployment({ ...trimEvery, ...env }, stops);
  if (e2eEnv().mode === 'cluster') {
    const worker = startWorker(prefix, {});
    stops.push(() => worker.stop());
  }
  const token = await login();
  const { baseUrl } = api;
  // As the admin, or as the user of `as`.
  const send = (headers: Record<string, string> = {}, as = token) =>
    execute({ statement: 'select 1 as one' }, { token: as, baseUrl, headers });
  const run = async (headers: Record<string, string> = {}, as = token): Promise<string> => {
    const res = await send(headers, as);
    expect(res.status).toBe(200);
    return (res.json as { query_id: string }).query_id;
  };
  const known = (queryId: string, suffix = '', as = token): Promise<HttpResult> =>
    request(undefined, {
      method: 'GET',
      path: `/v1/queries/${queryId}${suffix}`,
      token: as,
      baseUrl,
    });
  await firstAnswer(baseUrl, token);
  return { send, run, known, baseUrl, token };
}

describe('SLUICE_QUERY_RETENTION_COUNT', () => {
  // One deployment for both cases: the count is each user's, and each case has users of its own.
  let shared: ReturnType<typeof deployed> | undefined;
  const countOfThree = () => (shared ??= deployed({ SLUICE_QUERY_RETENTION_COUNT: '3' }));

  it('forgets finished queries past the count; the newest and a kept result stay', async () => {
    const { run, known } = await countOfThree();
    const kept = await run({ 'idempotency-key': randomUUID() });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await run());
    // Cluster: the index is trimmed as queries are created, at most every TRIM_MS.
    let newest = ids[4];
    let oldest = await known(ids[0]);
    for (let tries = 0; oldest.status !== 404 && tries < TRIES; tries++) {
      await sleep(TRIM_MS);
      newest = await run();
      oldest = await known(ids[0]);
    }
    expect(oldest.status).toBe(404);
    expect(oldest.json).toMatchObject({ status: { sql_state: '42704', vendor_code: -104 } });
    expect((await known(kept)).status).toBe(200);
    expect((await known(kept, '/result')).status).toBe(200);
    expect((await known(newest)).status).toBe(200);
  });

  it("counts each user's apart: another user's flood pushes none of mine out", async () => {
    const { run, known, baseUrl } = await countOfThree();
    const me = await createUser('records_mine');
    const flood = await createUser('records_flood');
    try {
      const mine = await run({}, me.token);
      const theirs: string[] = [];
      for (let i = 0; i < 12; i++) theirs.push(await run({}, flood.token));
      // Their oldest go as they come (Redis: past the count and a tenth of it, just after).
      const gone = await eventually(async () => {
        const res = await known(theirs[0], '', flood.token);
        return res.status === 404 ? res : undefined;
      });
      expect(gone.json).toMatchObject({ status: { vendor_code: -104 } });
      expect((await known(theirs[11], '', flood.token)).status).toBe(200);
      expect((await known(mine, '', me.token)).status).toBe(200);
      const list = await request(undefined, {
        method: 'GET',
        path: '/v1/queries',
        token: me.token,
        baseUrl,
      });
      expect((list.json as { query_id: string }[]).map((q) => q.query_id)).toEqual([mine]);
    } finally {
      await dropUser(me.username);
      await dropUser(flood.username);
    }
  });
});

describe('SLUICE_RESULT_RETENTION_COUNT', () => {
  it("drops a user's kept results past the count, with their queries, never another user's; a repeat of its key answers 410", async () => {
    const { send, run, known, baseUrl } = await deployed({ SLUICE_RESULT_RETENTION_COUNT: '2' });
    // Another user's kept result, older than all of the admin's below.
    const other = await createUser('kept_other');
    const others = await run({ 'idempotency-key': randomUUID() }, other.token);
    const key = randomUUID();
    const first = await run({ 'idempotency-key': key });
    // Past the count, but not past its TTL (an hour).
    let newest = await run({ 'idempotency-key': randomUUID() });
    let oldest = await known(first);
    let made = 3;
    for (let tries = 0; oldest.status !== 404 && tries < TRIES; tries++) {
      newest = await run({ 'idempotency-key': randomUUID() });
      made++;
      if (tries > 0) await sleep(TRIM_MS);
      oldest = await known(first);
    }
    expect(oldest.status).toBe(404);
    expect((await known(first, '/result')).status).toBe(404);
    const repeat = await send({ 'idempotency-key': key });
    expect(repeat.status).toBe(410);
    expect(repeat.json).toMatchObject({ status: { vendor_code: -113 } });
    const result = await known(newest, '/result');
    expect(result.status).toBe(200);
    expect(result.json).toMatchObject({ data: [[1]] });
    const kept = await known(others, '/result', other.token);
    expect(kept.status).toBe(200);
    expect(kept.json).toMatchObject({ data: [[1]] });
    await dropUser(other.username);
    // The bytes of those dropped are given back (each holds as many as the newest, give or take
    // a byte of its timings): less than all of them would hold.
    const each = ((await known(newest)).json as { bytes_produced: number }).bytes_produced;
    const metrics = await fetch(`${baseUrl}/metrics`).then((res) => res.text());
    const held = Number(/^sluice_kept_result_bytes\{[^}]*\} (\d+)/m.exec(metrics)?.[1]);
    expect(each).toBeGreaterThan(0);
    expect(held).toBeLessThan((made - 0.5) * each);
  });
});

describe('SLUICE_IDEMPOTENCY_KEYS_PER_USER', () => {
  it("refuses a user's new key past the count with 429 and Retry-After, without running it; held keys, keyless requests and other users go on", async () => {
    const { send, run, baseUrl } = await deployed({ SLUICE_IDEMPOTENCY_KEYS_PER_USER: '2' });
    const user = await createUser('keys_user');
    const as = user.token;
    const key = randomUUID();
    const first = await run({ 'idempotency-key': key }, as);
    await run({ 'idempotency-key': randomUUID() }, as);
    const refused = await send({ 'idempotency-key': randomUUID() }, as);
    expect(refused.status).toBe(429);
    expect(refused.json).toMatchObject({ status: { sql_state: '53400', vendor_code: -115 } });
    // The oldest key lapses within SLUICE_RESULT_TTL_SECONDS (an hour).
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(3500);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    // Never run: the user has the two queries of their two keys, no third.
    const listed = await request(undefined, {
      method: 'GET',
      path: '/v1/queries',
      token: as,
      baseUrl,
    });
    expect((listed.json as unknown[]).length).toBe(2);
    const repeat = await send({ 'idempotency-key': key }, as);
    expect(repeat.status).toBe(200);
    expect(repeat.json).toMatchObject({ query_id: first, data: [[1]] });
    expect((await send({}, as)).status).toBe(200);
    expect((await send({ 'idempotency-key': randomUUID() })).status).toBe(200);
    await dropUser(user.username);
  });
});

describe('SLUICE_RESULT_USER_MAX_BYTES', () => {
  it("fails a user's kept result past their share with 413, and never another user's; a drop frees the share", async () => {
    // The same cap whether kept results are in Redis or spooled (SLUICE_E2E_SPOOL).
    const { baseUrl, known } = await deployed({
      SLUICE_RESULT_USER_MAX_BYTES: String(128 * 1024),
      SLUICE_SPOOL_USER_MAX_BYTES: String(128 * 1024),
    });
    const hog = await createUser('kept_hog');
    const other = await createUser('kept_share');
    // ≈100 kB each: one fits in 128 kB, two do not.
    const statement = "select g, repeat('x', 1000) as pad from generate_series(1, 100) g";
    const keep = (as: string) =>
      execute(
        { statement },
        // Uncompressed: the share counts the bytes kept, which gzip would make ≈1 kB.
        {
          token: as,
          baseUrl,
          headers: { 'idempotency-key': randomUUID(), 'accept-encoding': 'identity' },
        },
      );
    const first = await keep(hog.token);
    expect(first.status).toBe(200);
    const refused = await keep(hog.token);
    expect(refused.status).toBe(413);
    expect(refused.json).toMatchObject({ status: { sql_state: '54000', vendor_code: -112 } });
    expect((refused.json as { status: { reason: string } }).status.reason).toContain(
      'SLUICE_RESULT_USER_MAX_BYTES',
    );
    const others = await keep(other.token);
    expect(others.status).toBe(200);
    expect((others.json as { data: unknown[] }).data).toHaveLength(100);
    const firstId = (first.json as { query_id: string }).query_id;
    const dropped = await request(undefined, {
      method: 'DELETE',
      path: `/v1/queries/${firstId}`,
      token: hog.token,
      baseUrl,
    });
    expect(dropped.status).toBe(200);
    expect((await known(firstId, '/result', hog.token)).status).not.toBe(200);
    expect((await keep(hog.token)).status).toBe(200);
    await dropUser(hog.username);
    await dropUser(other.username);
  });
});

describe('a kept result dropped while it is fetched', () => {
  it('cuts the fetch short (or ends it whole): never a part of the body ended as if whole', async () => {
    const { run, known, baseUrl, token } = await deployed({
      SLUICE_RESULT_RETENTION_COUNT: '1',
      SLUICE_RESULT_TTL_SECONDS: '600',
      SLUICE_RESULT_MAX_BYTES: String(64 * 1024 * 1024),
      SLUICE_RESULT_TOTAL_MAX_BYTES: String(256 * 1024 * 1024),
      SLUICE_SPOOL_MAX_BYTES: String(64 * 1024 * 1024),
      SLUICE_SPOOL_TOTAL_MAX_BYTES: String(256 * 1024 * 1024),
    });
    // ≈24 MB: far more than the api and the sockets between hold ahead of a paused reader.
    const big = await execute(
      {
        statement: "select g, repeat('x', 1000) as pad from generate_series(1, 24000) g",
        fetch_size: 100,
      },
      {
        token,
        baseUrl,
        headers: {
          'idempotency-key': randomUUID(),
          accept: 'application/stream+json',
          'accept-encoding': 'identity',
        },
      },
    );
    expect(big.status).toBe(200);
    const bigId = big.text.slice(0, 200).match(/"query_id":"([^"]+)"/)![1];
    const fetching = await new Promise<IncomingMessage>((resolve, reject) =>
      get(
        `${baseUrl}/v1/queries/${bigId}/result`,
        { headers: { authorization: `Bearer ${token}`, 'accept-encoding': 'identity' } },
        resolve,
      ).on('error', reject),
    );
    expect(fetching.statusCode).toBe(200);
    const head = await readUntil(fetching, (soFar) => soFar.length > 100_000);
    // Newer kept results push it out (the count is 1); the trim runs at most every TRIM_MS.
    let gone = await known(bigId);
    for (let tries = 0; gone.status !== 404 && tries < TRIES; tries++) {
      await run({ 'idempotency-key': randomUUID() });
      if (tries > 0) await sleep(TRIM_MS);
      gone = await known(bigId);
    }
    expect(gone.status).toBe(404);
    fetching.resume();
    const rest = readAll(fetching).then(
      (body) => ({ cut: false, length: head.length + body.length }),
      () => ({ cut: true, length: 0 }),
    );
    // In Redis the stream is gone under the fetch, which is cut; in-process the fetch holds the
    // records it reads, and ends whole.
    expect(await rest).toEqual(
      e2eEnv().mode === 'cluster'
        ? { cut: true, length: 0 }
        : { cut: false, length: big.text.length },
    );
  });
});
