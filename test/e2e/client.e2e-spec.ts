import { once } from 'node:events';
import { createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { SluiceClient, SluiceClientError } from '@app/client';
import { backendsOf, closeDb, db, e2eEnv, eventually, login } from './support/client';
import { freePort, randomName } from './support/service';
import { TcpProxy } from '../support/tcp.proxy';
import { claimsOf, createRole, createUser, dropRole, executeAs, signToken } from './support/users';

/** The client against the suite's service (both modes), logged in as the admin. */
function admin(extra: Partial<ConstructorParameters<typeof SluiceClient>[0]> = {}): SluiceClient {
  const env = e2eEnv();
  return new SluiceClient({
    url: env.baseUrl,
    credentials: { username: env.adminUser, password: env.adminPassword },
    ...extra,
  });
}

/** The error a promise rejects with, which must be a SluiceClientError. */
async function failureOf(work: Promise<unknown>): Promise<SluiceClientError> {
  const err = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SluiceClientError);
  return err as SluiceClientError;
}

const roles: string[] = [];
const users: string[] = [];

afterAll(async () => {
  await db().query('DELETE FROM sluice.users WHERE username = ANY($1)', [users]);
  for (const role of roles) await dropRole(role);
  await closeDb();
});

describe(SluiceClient.name, () => {
  it('returns the query id, the columns and rows typed as the JSON values the server sends', async () => {
    const result = await admin().query(
      `select 42::int as i, 9007199254740991::int8 as big, 1.25::numeric as n, 'x'::text as t,
              true as b, null::int as z, array[1,2] as a, '{"k":[1,"v"]}'::jsonb as j,
              '2024-01-02 03:04:05+00'::timestamptz as ts, {p}::text as p`,
      { p: 'bound' },
    );
    expect(result.queryId).toMatch(/^[0-9a-f-]{36}$/);
    expect(result.schema).toEqual([
      { name: 'i', type: 'integer' },
      { name: 'big', type: 'bigint' },
      { name: 'n', type: 'numeric' },
      { name: 't', type: 'text' },
      { name: 'b', type: 'boolean' },
      { name: 'z', type: 'integer' },
      { name: 'a', type: 'integer[]' },
      { name: 'j', type: 'jsonb' },
      { name: 'ts', type: 'timestamp with time zone' },
      { name: 'p', type: 'text' },
    ]);
    expect(result.rows).toEqual([
      [
        42,
        9007199254740991,
        1.25,
        'x',
        true,
        null,
        [1, 2],
        { k: [1, 'v'] },
        '2024-01-02T03:04:05+00:00',
        'bound',
      ],
    ]);
    expect(result.status).toMatchObject({ sql_state: '00000', vendor_code: 0, row_count: 1 });
  });

  it('streams rows as they come and ends with the final status', async () => {
    const stream = admin().stream('select g from generate_series(1, 2500) g', undefined, {
      fetchSize: 1000,
    });
    let n = 0;
    for await (const [g] of stream) expect(g).toBe(++n);
    expect(n).toBe(2500);
    expect(stream.queryId).toMatch(/^[0-9a-f-]{36}$/);
    expect(stream.status).toMatchObject({ sql_state: '00000', row_count: 2500 });
    expect(stream.bytes).toBeGreaterThan(2500 * 2);
  });

  it('throws one error class with the HTTP status, SQLSTATE, vendor code and query id', async () => {
    const early = await failureOf(admin().query('select * from no_such_table_here'));
    expect(early).toMatchObject({
      kind: 'status',
      httpStatus: 400,
      sqlState: '42P01',
      vendorCode: -600,
      retryable: false,
    });
    expect(early.message).toMatch(/no_such_table_here/);

    // After the first rows: the error is the final status line of a 200 response.
    const client = admin();
    const stream = client.stream(
      'select 1 / (5000 - g) as x from generate_series(1, 10000) g',
      {},
      {
        fetchSize: 1000,
      },
    );
    let rows = 0;
    const late = await failureOf(
      (async () => {
        for await (const row of stream) rows += row.length;
      })(),
    );
    expect(rows).toBeGreaterThan(0);
    expect(late).toMatchObject({ httpStatus: 200, sqlState: '22012', vendorCode: -520 });
    expect(late.queryId).toBe(stream.queryId);
    expect(late.queryId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('reports bad credentials as 401, and an unreachable server as retryable', async () => {
    const bad = new SluiceClient({
      url: e2eEnv().baseUrl,
      credentials: { username: e2eEnv().adminUser, password: 'wrong password' },
    });
    expect(await failureOf(bad.query('select 1'))).toMatchObject({
      httpStatus: 401,
      sqlState: '28P01',
      vendorCode: -304,
      retryable: false,
    });
    const nowhere = new SluiceClient({
      url: `http://127.0.0.1:${await freePort()}`,
      credentials: { token: 'x' },
    });
    expect(await failureOf(nowhere.queries())).toMatchObject({
      kind: 'connection',
      httpStatus: undefined,
      retryable: true,
    });
  });

  it('takes Basic credentials', async () => {
    const env = e2eEnv();
    const client = new SluiceClient({
      url: env.baseUrl,
      credentials: { basic: { username: env.adminUser, password: env.adminPassword } },
    });
    expect((await client.query('select 1 as one')).rows).toEqual([[1]]);
  });

  it('cancels the statement on the server when its AbortSignal fires', async () => {
    const controller = new AbortController();
    const stream = admin().stream(
      'select g, pg_sleep(0.01) from generate_series(1, 100000) g',
      undefined,
      { fetchSize: 5, signal: controller.signal },
    );
    const err = await failureOf(
      (async () => {
        for await (const row of stream) {
          if (row.length > 0 && !controller.signal.aborted) {
            expect(await backendsOf(stream.queryId!)).toBe(1);
            controller.abort();
          }
        }
      })(),
    );
    expect(err).toMatchObject({ kind: 'aborted', queryId: stream.queryId, retryable: false });
    await eventually(async () => ((await backendsOf(stream.queryId!)) === 0 ? true : undefined));
  });

  it('lists queries and cancels one by id', async () => {
    const client = admin();
    const stream = client.stream(
      'select g, pg_sleep(0.01) from generate_series(1, 100000) g',
      undefined,
      {
        fetchSize: 5,
      },
    );
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    const queryId = stream.queryId!;
    expect((await client.queries()).map((q) => q.query_id)).toContain(queryId);
    const cancelled = await client.cancel(queryId);
    expect(cancelled.query_id).toBe(queryId);
    const err = await failureOf(
      (async () => {
        for (;;) if ((await iterator.next()).done) break;
      })(),
    );
    expect(err).toMatchObject({ sqlState: '57014', vendorCode: -900, queryId });
    await eventually(async () => ((await backendsOf(queryId)) === 0 ? true : undefined));
    expect(await failureOf(client.cancel('00000000-0000-4000-8000-000000000000'))).toMatchObject({
      httpStatus: 404,
    });
  });

  it('follows a 202 to the kept result when the statement outlasts waitTimeout', async () => {
    const client = admin();
    const result = await client.query('select 42 as n from pg_sleep(1.2)', undefined, {
      waitTimeout: 100,
    });
    expect(result.rows).toEqual([[42]]);
    const csv = await client.export('select 7 as n from pg_sleep(1.2)', undefined, 'csv', {
      waitTimeout: 100,
    });
    expect(await new Response(csv.body).text()).toBe('n\r\n7\r\n');
    // Only a query answered 202 keeps its result at a URL of its own.
    const listed = await client.queries();
    for (const queryId of [result.queryId, csv.queryId]) {
      expect(listed.find((q) => q.query_id === queryId)?.result_url).toContain(queryId);
    }
  });

  it('sends an idempotency key, so that a repeated statement runs once', async () => {
    const table = randomName('client_idem');
    await db().query(`create table public.${table} (n int)`);
    await db().query(`grant all on public.${table} to ${e2eEnv().adminRole}`);
    try {
      const client = admin();
      const key = randomName('key');
      const insert = `insert into public.${table} values (1)`;
      const first = await client.query(insert, undefined, { idempotencyKey: key });
      const again = await client.query(insert, undefined, { idempotencyKey: key });
      expect(again.queryId).toBe(first.queryId);
      const { rows } = await db().query<{ n: number }>(
        `select count(*)::int as n from public.${table}`,
      );
      expect(rows[0].n).toBe(1);
    } finally {
      await db().query(`drop table public.${table}`);
    }
  });

  it('gives an export as the raw bytes of its format', async () => {
    const result = await admin().export(
      'select g as n from generate_series(1, 3) g',
      undefined,
      'csv',
    );
    expect(result.queryId).toMatch(/^[0-9a-f-]{36}$/);
    expect(result.contentType).toMatch(/^text\/csv/);
    expect(await new Response(result.body).text()).toBe('n\r\n1\r\n2\r\n3\r\n');
    const parquet = await admin().export('select 1 as n', undefined, 'parquet');
    const bytes = new Uint8Array(await new Response(parquet.body).arrayBuffer());
    expect(new TextDecoder().decode(bytes.slice(0, 4))).toBe('PAR1');
    expect(new TextDecoder().decode(bytes.slice(-4))).toBe('PAR1');
  });

  it('resumes a resumable export whose connection breaks: the bytes are those of an uncut download', async () => {
    const target = new URL(e2eEnv().baseUrl);
    const proxy = new TcpProxy(await freePort(), Number(target.port));
    await proxy.start();
    try {
      const viaProxy = admin({ url: `http://127.0.0.1:${proxy.port}` });
      // The last rows come a second late: the connection breaks while the statement runs.
      const sql =
        'select g, md5(g::text) as h, pg_sleep(case when g = 20000 then 1 else 0 end)::text as s from generate_series(1, 20000) g';
      const result = await viaProxy.export(sql, undefined, 'csv', { resumable: true });
      const reader = result.body.getReader();
      const parts: Uint8Array[] = [];
      const first = await reader.read();
      parts.push(first.value!);
      // Cut every connection, then let new ones through again.
      await proxy.stop();
      await proxy.start();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        parts.push(value);
      }
      const resumed = Buffer.concat(parts);
      const uncut = await fetch(`${e2eEnv().baseUrl}/v1/queries/${result.queryId}/result`, {
        headers: { authorization: `Bearer ${await login()}`, 'accept-encoding': 'identity' },
      });
      expect(uncut.status).toBe(200);
      expect(resumed.equals(Buffer.from(await uncut.arrayBuffer()))).toBe(true);
      expect(resumed.toString().trim().split('\r\n')).toHaveLength(20001);
    } finally {
      await proxy.stop();
    }
  });

  it("refreshes its token before it expires, and keeps working past the first one's expiry", async () => {
    const role = await createRole();
    roles.push(role);
    const user = await createUser({ role });
    users.push(user.username);
    // A real login's token, re-signed to live 6 s instead of the server's hour (4 to 6 s left).
    const real = claimsOf(await login(user.username, user.password));
    const now = Math.floor(Date.now() / 1000);
    const exp = now + 5;
    const short = signToken({ ...real, iat: now - 1, exp }, e2eEnv().jwtSecret);
    const seen: string[] = [];
    const client = new SluiceClient({
      url: e2eEnv().baseUrl,
      credentials: { token: short },
      onToken: (t) => seen.push(t),
    });
    expect((await client.query('select 1 as one')).rows).toEqual([[1]]);
    expect(client.accessToken).toBe(short);
    // Past half the token's life (3 s before its end) the client refreshes it before sending,
    // with time to spare for a slow request.
    await new Promise((r) => setTimeout(r, exp * 1000 - 2_800 - Date.now()));
    expect((await client.query('select 2 as two')).rows).toEqual([[2]]);
    expect(client.accessToken).not.toBe(short);
    // Past the first token's expiry: it is refused, the client's current one is not.
    await new Promise((r) => setTimeout(r, Math.max(0, (exp + 1) * 1000 - Date.now())));
    expect((await executeAs(short, { statement: 'select 1' })).status).toBe(401);
    expect((await client.query('select 3 as three')).rows).toEqual([[3]]);
    expect(seen).toEqual([short, client.accessToken]);

    // Logged in by password: a margin longer than the token's life refreshes on every request.
    const eager = new SluiceClient({
      url: e2eEnv().baseUrl,
      credentials: { username: user.username, password: user.password },
      refreshMarginSeconds: 365 * 86400,
    });
    await eager.query('select 1');
    const first = eager.accessToken;
    await eager.query('select 1');
    expect(eager.accessToken).not.toBe(first);
    expect((await executeAs(first!, { statement: 'select 1' })).status).toBe(401);
  });

  it('throws when a stream ends without its final status line', async () => {
    // A fake server: this checks the client's reading of the wire, not the service.
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/stream+json' });
      res.write('{"query_id":"q-1","schema":[{"name":"g","type":"integer"}]}\n');
      res.end('{"data":[[1],[2]]}\n');
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const client = new SluiceClient({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        credentials: { token: 'opaque' },
      });
      const rows: unknown[] = [];
      const err = await failureOf(
        (async () => {
          for await (const row of client.stream('select g')) rows.push(row);
        })(),
      );
      expect(rows).toEqual([[1], [2]]);
      expect(err).toMatchObject({ kind: 'protocol', queryId: 'q-1', httpStatus: 200 });
      expect(err.message).toMatch(/without its final status/);
    } finally {
      server.close();
    }
  });
});
