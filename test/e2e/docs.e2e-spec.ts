import {
  HttpResult,
  createUser,
  db,
  dropUser,
  e2eEnv,
  eventually,
  execute,
  holdLock,
  login,
  request,
  slotFillers,
  usersDroppedAfterAll,
} from './support/client';
import { ExtraApi, startExtraApi } from './support/extra-api';
import { grantToControl } from './support/roles';
import { dropRole } from './support/users';

/**
 * Behaviour docs/api.md and docs/architecture.md describe that no other spec asserts: media-type
 * aliases, response headers, the body and statement limits, /v1/info's isolation fields, the
 * statement shown by /v1/queries, the global queue cap and the start-up warning about a superuser
 * control login.
 */

const users = usersDroppedAfterAll();

/** The requests /docs offers to send, as /openapi.json gives them. */
async function documentedExecute(): Promise<{
  json: Record<string, { summary: string; value: unknown }>;
  text: string;
  query: { name: string; required: boolean; schema?: { example?: unknown } }[];
}> {
  const doc = (await request(undefined, { method: 'GET', path: '/openapi.json' })).json;
  const content = doc.paths['/v1/execute'].post.requestBody.content;
  return {
    json: content['application/json'].examples,
    text: content['text/plain'].schema.example,
    query: doc.paths['/v1/execute'].get.parameters.filter((p: { in: string }) => p.in === 'query'),
  };
}

describe('documented examples', () => {
  it('succeeds with every example of POST /v1/execute sent as /docs shows it', async () => {
    const { json } = await documentedExecute();
    expect(Object.keys(json).length).toBeGreaterThanOrEqual(3);
    for (const [name, example] of Object.entries(json)) {
      const res = await execute(example.value);
      expect({ name, status: res.status }).toEqual({ name, status: 200 });
      expect(res.json.status).toMatchObject({ sql_state: '00000', vendor_code: 0 });
    }
  });

  it('succeeds with the text/plain example and with the GET form filled in with its examples', async () => {
    const { text, query } = await documentedExecute();
    const plain = await execute(undefined, {
      raw: text,
      headers: { 'content-type': 'text/plain' },
    });
    expect(plain.status).toBe(200);
    expect(plain.json.status).toMatchObject({ sql_state: '00000' });
    // Try it out fills in the required fields with their examples, the rest left out.
    const required = query.filter((p) => p.required);
    expect(required.map((p) => p.name)).toEqual(['statement']);
    const search = new URLSearchParams(
      required.map((p): [string, string] => [p.name, String(p.schema?.example)]),
    );
    const res = await execute(undefined, {
      method: 'GET',
      path: `/v1/execute?${search.toString()}`,
    });
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([[1]]);
  });

  it('lists every field of the JSON request as a query parameter of GET /v1/execute', async () => {
    const { query } = await documentedExecute();
    const doc = (await request(undefined, { method: 'GET', path: '/openapi.json' })).json;
    const fields = Object.keys(doc.components.schemas.ExecuteRequestDto.properties);
    expect(query.map((p) => p.name).sort()).toEqual(fields.sort());
  });
});

/** An operation of /openapi.json whose JSON request body has named examples. */
interface DocumentedRequest {
  method: string;
  path: string;
  parameters?: { name: string; in: string; example?: unknown; schema?: { example?: unknown } }[];
  examples: Record<string, { summary: string; value: unknown }>;
}

/** Every operation whose request body /docs offers examples of, as /openapi.json gives them. */
async function documentedRequests(): Promise<DocumentedRequest[]> {
  const doc = (await request(undefined, { method: 'GET', path: '/openapi.json' })).json as {
    paths: Record<string, Record<string, Record<string, any>>>;
  };
  const found: DocumentedRequest[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      const examples = operation.requestBody?.content?.['application/json']?.examples;
      if (examples) found.push({ method, path, parameters: operation.parameters, examples });
    }
  }
  return found;
}

describe('documented request examples', () => {
  // The examples' user and role (libs/http-contracts): made and removed here, as a reader of the
  // docs would make the role in PostgreSQL before sending them.
  const EXAMPLE_USER = 'alice';
  const EXAMPLE_ROLE = 'analyst';

  beforeAll(async () => {
    await dropUser(EXAMPLE_USER);
    const client = await db().connect();
    try {
      await client.query(
        `DO $$ BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${EXAMPLE_ROLE}') THEN
             CREATE ROLE ${EXAMPLE_ROLE} NOLOGIN;
           END IF;
         END $$`,
      );
      await grantToControl(client, EXAMPLE_ROLE, e2eEnv().controlRole);
    } finally {
      client.release();
    }
  });

  afterAll(async () => {
    await dropUser(EXAMPLE_USER);
    await dropRole(EXAMPLE_ROLE);
  });

  it('succeeds with every request example of every operation, sent as /docs shows it, in the order a reader would', async () => {
    const documented = await documentedRequests();
    // Make the user, log in as it, change it; run statements. An operation that documents an
    // example must be in this list, so that its example is sent.
    const order = [
      'post /v1/users',
      'post /v1/login',
      'patch /v1/users/{name}',
      'post /v1/execute',
      'post /v1/execute/{database}',
    ];
    expect(documented.map((d) => `${d.method} ${d.path}`).sort()).toEqual([...order].sort());
    documented.sort(
      (a, b) => order.indexOf(`${a.method} ${a.path}`) - order.indexOf(`${b.method} ${b.path}`),
    );
    const token = await login();
    for (const operation of documented) {
      // Path parameters as documented; the database has no example: the deployment's own.
      const path = operation.path.replace(/\{(\w+)\}/g, (_, name: string) => {
        if (name === 'database') return e2eEnv().defaultDatabase;
        const parameter = operation.parameters?.find((p) => p.name === name);
        const example = parameter?.example ?? parameter?.schema?.example;
        expect({ name, example }).toEqual({ name, example: expect.any(String) });
        return encodeURIComponent(String(example));
      });
      for (const [name, example] of Object.entries(operation.examples)) {
        const res = await request(example.value, {
          method: operation.method.toUpperCase(),
          path,
          token: operation.path === '/v1/login' ? undefined : token,
        });
        const sent = `${operation.method} ${operation.path} ${name}`;
        if (res.status >= 300) throw new Error(`${sent}: answered ${res.status} ${res.text}`);
        expect(res.json.status).toMatchObject({ sql_state: '00000', vendor_code: 0 });
      }
    }
  });
});

describe('documented responses', () => {
  it('streams newline-delimited JSON for the application/x-ndjson alias', async () => {
    const res = await execute(
      { statement: 'select g from generate_series(1, 3) g', fetch_size: 2 },
      { headers: { accept: 'application/x-ndjson' } },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/stream\+json/);
    const lines = res.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.slice(1)).toEqual([
      { data: [[1], [2]] },
      { data: [[3]] },
      { status: { reason: 'OK', sql_state: '00000', vendor_code: 0, row_count: 3 } },
    ]);
  });

  it('answers JSON for Accept */*, with no-store caching and Vary on Accept and Accept-Encoding', async () => {
    const res = await execute({ statement: 'select 1 as one' }, { headers: { accept: '*/*' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.json.data).toEqual([[1]]);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('vary')).toBe('Accept, Accept-Encoding');
  });

  it('says who users are and how statements are kept to them in /v1/info', async () => {
    const res = await request(undefined, { method: 'GET', path: '/v1/info' });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      auth: 'service',
      role_isolation: 'login role per user role',
    });
  });

  it('keeps a statement up to SLUICE_RECORD_STATEMENT_BYTES for /v1/queries/{id}, cut at a character, and lists its first 200 characters', async () => {
    // The suite runs with the default of 16384 bytes; 'é' is two of them.
    const statement = `select 1 as one -- ${'é'.repeat(10_000)}`;
    const res = await execute({ statement });
    expect(res.status).toBe(200);
    const id = res.json.query_id as string;
    const token = await login();
    const info = await request(undefined, { method: 'GET', path: `/v1/queries/${id}`, token });
    expect(info.status).toBe(200);
    const kept = info.json.statement as string;
    expect(kept).toBe(statement.slice(0, 19 + 8182));
    expect(Buffer.byteLength(kept)).toBe(16383);
    const list = await request(undefined, { method: 'GET', path: '/v1/queries', token });
    const listed = (list.json as { query_id: string; statement: string }[]).find(
      (q) => q.query_id === id,
    );
    expect(listed?.statement).toBe(statement.slice(0, 200));
  });
});

describe('documented limits', () => {
  it('refuses a body over SLUICE_MAX_BODY_BYTES with 413 and vendor code -106', async () => {
    // The suite runs with the default of 1048576 bytes.
    const res = await execute({ statement: `select 1 -- ${'x'.repeat(1_100_000)}` });
    expect(res.status).toBe(413);
    expect(res.json.status).toEqual({
      reason: expect.any(String),
      sql_state: '54000',
      vendor_code: -106,
    });
  });

  it('refuses a statement over SLUICE_MAX_STATEMENT_LENGTH with 413 and -111, before queueing it', async () => {
    // The default limit is 262144 characters; the body stays under the body limit.
    const res = await execute({ statement: `select 1 -- ${'x'.repeat(270_000)}` });
    expect(res.status).toBe(413);
    expect(res.json.status).toMatchObject({ sql_state: '54000', vendor_code: -111 });
    expect(res.json.status.reason).toMatch(/262144/);
    expect(res.json.query_id).toBeUndefined();
  });
});

/**
 * An api of its own with SLUICE_MAX_QUEUED=1 and a superuser as its control login. Standalone: its
 * own in-process queue and one thread running one query at a time; cluster: the suite's queue and
 * workers.
 */
describe('an api with a queue cap of one and a superuser control login', () => {
  let extra: ExtraApi;

  beforeAll(async () => {
    extra = await startExtraApi({
      DATABASE_URL: e2eEnv().databaseUrl,
      SLUICE_MAX_QUEUED: '1',
      SLUICE_TASKS_PER_THREAD: '1',
    });
  }, 120_000);

  afterAll(async () => {
    await extra?.stop();
  });

  it('warns at start-up that the control login is a superuser', async () => {
    await eventually(
      async () =>
        Promise.resolve(
          /ROLE ISOLATION: DATABASE_URL logs in as superuser/.test(extra.output()) || undefined,
        ),
      20_000,
    );
  });

  it('answers 429 with Retry-After once SLUICE_MAX_QUEUED queries wait', async () => {
    const { mode, capacity } = e2eEnv();
    const running = mode === 'cluster' ? capacity : 1;
    // Cluster: users enough to take the suite's workers' every slot (one user holds a share).
    const fill =
      mode === 'cluster'
        ? await slotFillers('e2e_docs_cap')
        : await createUser('e2e_docs_cap').then((u) => ({ users: [u], tokenFor: () => u.token }));
    users.push(...fill.users.map((u) => u.username));
    const send = (statement: string, i = 0) =>
      execute({ statement }, { token: fill.tokenFor(i), baseUrl: extra.baseUrl });
    const inState = async (state: string) => {
      let n = 0;
      for (const { token } of fill.users) {
        const list = await request(undefined, {
          method: 'GET',
          path: '/v1/queries',
          token,
          baseUrl: extra.baseUrl,
        });
        n += (list.json as { state: string }[]).filter((q) => q.state === state).length;
      }
      return n;
    };
    // Every slot held until the refusal came: the statements wait on a lock the test holds.
    const lock = await holdLock();
    const sleepers = Array.from({ length: running }, (_, i) =>
      send(`select 1 from ${lock.waitOn}`, i),
    );
    let waiting: Promise<HttpResult> | undefined;
    try {
      await eventually(async () => ((await inState('running')) === running ? true : undefined));
      waiting = send('select 1 as waited');
      await eventually(async () => ((await inState('queued')) === 1 ? true : undefined));
      // The api reads the queue's length at most every 100 ms.
      await new Promise((r) => setTimeout(r, 200));
      const refused = await send('select 1 as refused');
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(refused.json.status).toMatchObject({ sql_state: '53000', vendor_code: -108 });
      expect(refused.json.status.reason).toMatch(/queue is full/);
    } finally {
      await lock.release();
    }
    for (const res of await Promise.all([...sleepers, waiting])) expect(res?.status).toBe(200);
  }, 60_000);
});
