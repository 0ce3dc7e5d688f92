import { ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import Redis from 'ioredis';
import { Pool } from 'pg';
import { testDatabaseUrl } from '../settings';
import {
  backendsOf,
  createUser,
  e2eEnv,
  eventually,
  execute,
  login,
  request,
  usersDroppedAfterAll,
} from './support/client';
import { RawAnswer, rawExchange, rawRequestText } from './support/raw';
import { expectEnvelope } from './support/users';
import { ServiceProcess, freePort, startProcess, waitForApi } from './support/service';

/** Operating Sluice: health, metrics, logs, the queue dashboard, the OpenAPI description. */

const users = usersDroppedAfterAll();

/** The fields of an execute request's log line, as docs/architecture.md (Logs) lists them. */
const EXECUTE_LINE_FIELDS = [
  ...['level', 'time', 'pid', 'hostname', 'name', 'context', 'msg'],
  ...['request_id', 'query_id', 'user', 'database', 'format', 'lane', 'outcome', 'http_status'],
  ...['sql_state', 'vendor_code', 'rows', 'bytes', 'duration_ms', 'queue_wait_ms', 'run_ms'],
  'trace_id',
];

async function user(prefix: string) {
  const created = await createUser(prefix);
  users.push(created.username);
  return created;
}

/** Sum of the samples of a metric whose labels include `labels`. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  let found = false;
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) {
      sum += Number(match[3]);
      found = true;
    }
  }
  if (!found) throw new Error(`no sample ${name} ${JSON.stringify(labels)}`);
  return sum;
}

async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
  return res.text();
}

/**
 * The queue depth an api reports, scraped until `settled` holds or 10 s have passed: the last one
 * seen, for the test to assert on (a gauge is read when scraped, after the client has its answer).
 */
async function queueDepth(
  baseUrl: string,
  settled: (depth: { waiting: number; active: number }) => boolean,
): Promise<{ waiting: number; active: number }> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const text = await scrape(baseUrl);
    const depth = {
      waiting: sample(text, 'sluice_queue_jobs', { state: 'waiting' }),
      active: sample(text, 'sluice_queue_jobs', { state: 'active' }),
    };
    if (settled(depth) || Date.now() > deadline) return depth;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const basic = (name: string, password: string) =>
  `Basic ${Buffer.from(`${name}:${password}`).toString('base64')}`;

describe('health', () => {
  it('answers /health/live on every api', async () => {
    for (const baseUrl of e2eEnv().baseUrls) {
      const res = await request(undefined, { method: 'GET', path: '/health/live', baseUrl });
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ status: { reason: 'live', sql_state: '00000', vendor_code: 0 } });
    }
  });

  it('is ready on every api: metadata PostgreSQL, a live worker and (cluster) Redis answer', async () => {
    const { mode, baseUrls } = e2eEnv();
    for (const baseUrl of baseUrls) {
      const res = await request(undefined, { method: 'GET', path: '/health/ready', baseUrl });
      expect(res.status).toBe(200);
      expect(res.json.status).toEqual({ reason: 'ready', sql_state: '00000', vendor_code: 0 });
      expect(Object.keys(res.json.checks).sort()).toEqual(
        mode === 'cluster' ? ['database', 'redis', 'workers'] : ['database', 'workers'],
      );
      for (const check of Object.values<{ ok: boolean }>(res.json.checks)) {
        expect(check.ok).toBe(true);
      }
      expect(res.json.checks.workers.detail).toMatch(
        mode === 'cluster' ? /^[1-9]\d* seen in the last/ : /in-process/,
      );
    }
  });
});

describe('metrics', () => {
  it('counts a query on the api that served it: outcome, rows, bytes, duration and queue wait', async () => {
    const baseUrl = e2eEnv().baseUrls[0];
    const before = await scrape(baseUrl);
    const count = (text: string, name: string, labels: Record<string, string> = {}) => {
      try {
        return sample(text, name, labels);
      } catch {
        return 0;
      }
    };
    const res = await execute({ statement: 'select g from generate_series(1, 25) g' }, { baseUrl });
    expect(res.status).toBe(200);
    const failed = await execute({ statement: 'select * from no_such_table_ops' }, { baseUrl });
    expect(failed.status).toBe(400);
    // Refused before it was queued: a placeholder with no value.
    const rejected = await execute({ statement: 'select {missing} as m' }, { baseUrl });
    expect(rejected.status).toBe(400);
    // Answered 202 before its result.
    const accepted = await execute({ statement: 'select 1 as n', wait_timeout: 0 }, { baseUrl });
    expect(accepted.status).toBe(202);
    // The request is counted when its response closes, just after the client has it.
    const standalone = e2eEnv().mode === 'standalone';
    const after = await eventually(async () => {
      const text = await scrape(baseUrl);
      const grew = (name: string, labels: Record<string, string>, by: number) =>
        count(text, name, labels) - count(before, name, labels) >= by;
      // The pool counts a task when its thread hands it back, a moment after the response.
      const counted =
        grew('sluice_queries_total', { outcome: 'failed' }, 1) &&
        grew('sluice_queries_total', { outcome: 'rejected' }, 1) &&
        grew('sluice_queries_total', { outcome: 'accepted' }, 1) &&
        (!standalone || grew('sluice_pool_tasks_completed_total', {}, 2));
      return counted ? text : undefined;
    });
    const moved = (name: string, labels: Record<string, string> = {}) =>
      count(after, name, labels) - count(before, name, labels);
    expect(moved('sluice_queries_total', { outcome: 'succeeded' })).toBeGreaterThanOrEqual(1);
    expect(moved('sluice_result_rows_total')).toBeGreaterThanOrEqual(25);
    expect(moved('sluice_result_bytes_total')).toBeGreaterThan(0);
    expect(
      moved('sluice_query_duration_seconds_count', { outcome: 'succeeded' }),
    ).toBeGreaterThanOrEqual(1);
    expect(moved('sluice_query_queue_wait_seconds_count')).toBeGreaterThanOrEqual(2);
    expect(sample(after, 'sluice_workers_alive')).toBeGreaterThanOrEqual(1);
    // Queue depth is always there, and back to nothing waiting or running once both are done.
    expect(await queueDepth(baseUrl, (d) => d.waiting === 0 && d.active === 0)).toEqual({
      waiting: 0,
      active: 0,
    });
    // So is Node's event-loop delay, in seconds. Node times the loop on a 10 ms timer, so a measured
    // delay is at least about 0.01 s (an empty histogram reads 5e-7 s); each scrape resets it.
    await new Promise((r) => setTimeout(r, 50));
    const lag = sample(await scrape(baseUrl), 'nodejs_eventloop_lag_p99_seconds');
    expect(lag).toBeGreaterThan(0.005);
    expect(lag).toBeLessThan(5);
    if (standalone) {
      // The thread pool runs in this process: its utilisation is the api's to report.
      expect(sample(after, 'sluice_pool_threads')).toBeGreaterThanOrEqual(1);
      expect(sample(after, 'sluice_pool_utilization')).toBeGreaterThan(0);
      expect(moved('sluice_pool_tasks_completed_total')).toBeGreaterThanOrEqual(2);
    } else {
      expect(sample(after, 'sluice_queue_jobs', { state: 'completed' })).toBeGreaterThanOrEqual(1);
    }
  });

  it('shows the heap growth every api and worker set at start (SLUICE_HEAP_GROWING_PERCENT: 200)', async () => {
    const env = e2eEnv();
    // Standalone mode's api is also where statements run: one process, listed twice.
    const urls = new Set([...env.baseUrls.map((url) => `${url}/metrics`), ...env.poolMetricsUrls]);
    expect(urls.size).toBeGreaterThanOrEqual(env.mode === 'standalone' ? 1 : 2);
    for (const url of urls) {
      const text = await (await fetch(url)).text();
      expect(sample(text, 'sluice_heap_growing_percent')).toBe(200);
    }
  });

  it('counts the full collection a pool thread runs once idle after 32 MiB of results', async () => {
    const { poolMetricsUrls, baseUrls } = e2eEnv();
    const collections = async () => {
      let total = 0;
      for (const url of poolMetricsUrls) {
        total += sample(await (await fetch(url)).text(), 'sluice_pool_idle_collections_total');
      }
      return total;
    };
    const before = await collections();
    // ≈ 40 MB of JSON from one statement: its thread has produced the 32 MiB that start the wait.
    const res = await execute(
      { statement: "select repeat('x', 1000) as v from generate_series(1, 40000)" },
      { baseUrl: baseUrls[0] },
    );
    expect(res.status).toBe(200);
    // Once the thread has had no statement for 200 ms (other suites' may put it off).
    await eventually(async () => ((await collections()) > before ? true : undefined), 30_000);
  });

  it('shows a running query in the queue depth', async () => {
    const baseUrl = e2eEnv().baseUrls[0];
    const { token } = await user('e2e_ops_depth');
    const pending = execute({ statement: 'select pg_sleep(30)' }, { token, baseUrl });
    const id = await eventually(async () => {
      const list = await request(undefined, { method: 'GET', path: '/v1/queries', token });
      return (list.json as { query_id: string; state: string }[]).find((q) => q.state === 'running')
        ?.query_id;
    });
    const text = await scrape(baseUrl);
    expect(sample(text, 'sluice_queue_jobs', { state: 'active' })).toBeGreaterThanOrEqual(1);
    await request(undefined, { method: 'DELETE', path: `/v1/queries/${id}`, token });
    expect((await pending).status).toBe(409);
  });
});

describe('application_name', () => {
  // lifecycle.e2e-spec.ts relies on the same to watch cancels reach PostgreSQL.
  it('names the statement in pg_stat_activity after its query id while it runs', async () => {
    const { token } = await user('e2e_ops_appname');
    const pending = execute({ statement: 'select pg_sleep(30)' }, { token });
    const id = await eventually(async () => {
      const list = await request(undefined, { method: 'GET', path: '/v1/queries', token });
      return (list.json as { query_id: string; state: string }[]).find((q) => q.state === 'running')
        ?.query_id;
    });
    await eventually(async () => ((await backendsOf(id)) === 1 ? true : undefined));
    await request(undefined, { method: 'DELETE', path: `/v1/queries/${id}`, token });
    expect((await pending).status).toBe(409);
    await eventually(async () => ((await backendsOf(id)) === 0 ? true : undefined));
  });
});

describe('queue dashboard', () => {
  it('refuses an anonymous request with 401 and no Basic challenge: nothing a browser would prompt for', async () => {
    const res = await request(undefined, { method: 'GET', path: '/admin/queues' });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer realm="sluice admin"');
    expect(res.json).toEqual({
      status: { reason: 'not signed in: sign in on /admin', sql_state: '28000', vendor_code: -300 },
    });
    const api = await request(undefined, { method: 'GET', path: '/admin/queues/api/queues' });
    expect(api.status).toBe(401);
    expect(api.headers.get('www-authenticate')).not.toMatch(/basic/i);
  });

  it('sends a browser that opens it without signing in to the admin sign-in page', async () => {
    // Raw: fetch() would set Sec-Fetch-Mode: cors itself.
    for (const lines of [
      ['Sec-Fetch-Mode: navigate', 'Sec-Fetch-Dest: document', 'Accept: text/html'],
      ['Accept: text/html,application/xhtml+xml'],
    ]) {
      const res = await rawExchange(
        e2eEnv().baseUrl,
        rawRequestText('GET /admin/queues/queue/execute HTTP/1.1', lines),
      );
      expect(res.status).toBe(303);
      expect(res.head).toMatch(/^location: \/admin\r?$/im);
      expect(res.head).not.toMatch(/^www-authenticate:/im);
    }
    // A frame or a script is answered, not sent elsewhere.
    const framed = await rawExchange(
      e2eEnv().baseUrl,
      rawRequestText('GET /admin/queues HTTP/1.1', [
        'Sec-Fetch-Mode: navigate',
        'Sec-Fetch-Dest: iframe',
      ]),
    );
    expect(framed.status).toBe(401);
  });

  it('refuses a wrong password and a forged token with 401', async () => {
    // Not the admin: failed logins count towards a lockout.
    const { username } = await user('e2e_ops_wrong');
    const wrong = await request(undefined, {
      method: 'GET',
      path: '/admin/queues',
      headers: { authorization: basic(username, 'not-the-password') },
    });
    expect(wrong.status).toBe(401);
    expect(wrong.json.status.vendor_code).toBe(-304);
    // Not even after a wrong password: a Basic challenge would make a browser prompt.
    expect(wrong.headers.get('www-authenticate')).not.toMatch(/basic/i);
    const forged = await request(undefined, {
      method: 'GET',
      path: '/admin/queues',
      token: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJlMmVfYWRtaW4ifQ.c2lnbmF0dXJl',
    });
    expect(forged.status).toBe(401);
    expect(forged.json.status.vendor_code).toBe(-301);
    expect(forged.headers.get('www-authenticate')).not.toMatch(/basic/i);
  });

  it('refuses a user who is not an administrator with 403, by token and by password', async () => {
    const { token, username } = await user('e2e_ops_plain');
    for (const headers of [
      { authorization: `Bearer ${token}` },
      { authorization: basic(username, `pw-${username}`) },
    ]) {
      for (const path of ['/admin/queues', '/admin/queues/api/queues']) {
        const res = await request(undefined, { method: 'GET', path, headers });
        expect(res.status).toBe(403);
        expect(res.json.status).toMatchObject({ sql_state: '42501', vendor_code: -700 });
      }
    }
  });

  it('shows an administrator the dashboard (cluster), or says standalone mode has none', async () => {
    const { mode, adminUser, adminPassword } = e2eEnv();
    for (const headers of [
      { authorization: `Bearer ${await login()}` },
      { authorization: basic(adminUser, adminPassword) },
    ]) {
      const res = await request(undefined, { method: 'GET', path: '/admin/queues', headers });
      if (mode === 'cluster') {
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toMatch(/^text\/html/);
        expect(res.text).toContain('<title>Sluice queue</title>');
      } else {
        expect(res.status).toBe(404);
        expect(res.json.status.vendor_code).toBe(-104);
        expect(res.json.status.reason).toMatch(/standalone mode/);
      }
    }
  });

  it('never shows the values of bind parameters in job data', async () => {
    const secret = `s3cret-${randomBytes(4).toString('hex')}`;
    const baseUrl = e2eEnv().baseUrls[0];
    const res = await execute(
      { statement: 'select {v}::text as v, {n} as n', params: { v: secret, n: 7 } },
      { baseUrl },
    );
    expect(res.status).toBe(200);
    const id = res.json.query_id as string;
    const path = '/admin/queues/api/queues?activeQueue=execute&status=completed&page=1';
    const token = await login();
    if (e2eEnv().mode === 'standalone') {
      const none = await request(undefined, { method: 'GET', path, token, baseUrl });
      expect(none.status).toBe(404);
      return;
    }
    const listed = await eventually(async () => {
      const got = await request(undefined, { method: 'GET', path, token, baseUrl });
      expect(got.status).toBe(200);
      const jobs = got.json.queues[0].jobs as { id: string }[];
      return jobs.some((j) => j.id === id) ? got : undefined;
    });
    const job = (
      listed.json.queues[0].jobs as { id: string; data: Record<string, unknown> }[]
    ).find((j) => j.id === id)!;
    expect(job.data.values).toEqual(['[redacted]', '[redacted]']);
    expect(job.data.text).toBe('select $1::text as v, $2 as n');
    expect(listed.text).not.toContain(secret);
    const one = await request(undefined, {
      method: 'GET',
      path: `/admin/queues/api/queues/execute/${id}`,
      token,
      baseUrl,
    });
    expect(one.status).toBe(200);
    expect(one.text).not.toContain(secret);
    // Read-only: the dashboard can neither run a statement again nor queue a new one.
    for (const [method, action, body] of [
      ['PUT', `${id}/retry`, undefined],
      ['PUT', `${id}/clean`, undefined],
      ['POST', 'add', { name: 'execute', data: { text: 'select 1' } }],
    ] as const) {
      const refused = await request(body, {
        method,
        path: `/admin/queues/api/queues/execute/${action}`,
        token,
        baseUrl,
      });
      expect(refused.status).toBe(405);
    }
  });

  it("answers the dashboard's own refusals in the error envelope: read-only (405), no such queue or job (404)", async () => {
    const token = await login();
    const standalone = e2eEnv().mode === 'standalone';
    for (const [method, path, status] of [
      ['PUT', '/admin/queues/api/queues/execute/pause', 405],
      ['PUT', '/admin/queues/api/queues/execute/retry/failed', 405],
      ['POST', '/admin/queues/api/queues/execute-export/add', 405],
      ['GET', '/admin/queues/api/queues/execute/no-such-job', 404],
      ['GET', '/admin/queues/api/queues/no-such-queue/1', 404],
    ] as const) {
      const res = await request(undefined, { method, path, token });
      expect(res.status).toBe(standalone ? 404 : status);
      expectEnvelope(res, '42704', -104);
    }
  });

  it("keeps a large statement's finished job short: what the queue keeps is bounded", async () => {
    const padding = 'x'.repeat(200_000);
    const baseUrl = e2eEnv().baseUrls[0];
    const res = await execute(
      { statement: `select {v}::text as v -- ${padding}`, params: { v: 'y'.repeat(50_000) } },
      { baseUrl },
    );
    expect(res.status).toBe(200);
    if (e2eEnv().mode === 'standalone') return; // no queue keeps job data
    const id = res.json.query_id as string;
    const token = await login();
    const path = `/admin/queues/api/queues/execute/${id}`;
    const job = await eventually(async () => {
      const got = await request(undefined, { method: 'GET', path, token, baseUrl });
      expect(got.status).toBe(200);
      const shown = (got.json as { job: { data: { text: string; values: unknown[] } } }).job;
      return shown.data.text.length < 2_000 ? shown : undefined;
    });
    expect(job.data.text).toMatch(
      /^select \$1::text as v -- x+… \(\d+ characters, cut once run\)$/,
    );
    expect(job.data.values).toEqual([]);
  });
});

describe('OpenAPI', () => {
  const mediaTypes = [
    'application/json',
    'application/stream+json',
    'text/csv',
    'application/parquet',
    'application/vnd.apache.arrow.stream',
  ];

  it('describes the error envelope on every error response, and every status code of execute', async () => {
    const res = await request(undefined, { method: 'GET', path: '/openapi.json' });
    expect(res.status).toBe(200);
    const doc = res.json;
    expect(doc.components.schemas.ErrorEnvelope).toMatchObject({
      required: ['status'],
      properties: { query_id: { type: 'string' }, status: { $ref: '#/components/schemas/Status' } },
    });
    expect(Object.keys(doc.components.schemas.Status.properties)).toEqual(
      expect.arrayContaining(['reason', 'sql_state', 'vendor_code']),
    );
    let errors = 0;
    for (const [path, item] of Object.entries(doc.paths as Record<string, any>)) {
      for (const [method, operation] of Object.entries(item as Record<string, any>)) {
        const codes = Object.keys(operation.responses);
        expect(codes).toEqual(expect.arrayContaining(['500', '503']));
        if (operation.security?.length) expect(codes).toContain('401');
        for (const code of codes.filter((c) => Number(c) >= 400)) {
          const schema = operation.responses[code].content?.['application/json']?.schema;
          const expected = path === '/health/ready' ? 'ReadinessReport' : 'ErrorEnvelope';
          expect({ method, path, code, ref: schema?.$ref }).toEqual({
            method,
            path,
            code,
            ref: `#/components/schemas/${expected}`,
          });
          errors += 1;
        }
      }
    }
    expect(errors).toBeGreaterThan(50);
    for (const path of ['/v1/execute', '/v1/execute/{database}']) {
      for (const method of ['post', 'get']) {
        const operation = doc.paths[path][method];
        expect(Object.keys(operation.responses).sort()).toEqual(
          expect.arrayContaining([
            '200',
            '400',
            '401',
            '403',
            '406',
            '409',
            '413',
            '415',
            '429',
            '500',
            '503',
            '504',
          ]),
        );
        expect(operation.responses['201']).toBeUndefined();
        expect(Object.keys(operation.responses['200'].content).sort()).toEqual(
          [...mediaTypes].sort(),
        );
        expect(operation.responses['200'].content['application/json'].schema.$ref).toBe(
          '#/components/schemas/ExecuteResult',
        );
        expect(operation.responses['200'].content['application/parquet'].schema.format).toBe(
          'binary',
        );
      }
    }
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/health/live', '/health/ready', '/metrics']),
    );
  });

  it('serves the docs page', async () => {
    const res = await request(undefined, { method: 'GET', path: '/docs' });
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/swagger/i);
  });

  it("forbids other sites to frame the docs page, whose Try it out runs statements with the browser's credentials", async () => {
    for (const path of ['/docs', '/docs/', '/docs/swagger-ui-init.js']) {
      const res = await request(undefined, { method: 'GET', path });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('content-security-policy')).toBe("frame-ancestors 'none'");
    }
    // Only there: results keep their own headers.
    const info = await request(undefined, { method: 'GET', path: '/v1/info' });
    expect(info.headers.get('x-frame-options')).toBeNull();
  });
});

describe('the landing page at /', () => {
  const BROWSER = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

  it('shows a browser a page of links to /admin, /docs, the CLI and the docs, under its own CSP', async () => {
    const res = await request(undefined, {
      method: 'GET',
      path: '/',
      headers: { accept: BROWSER },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('vary')).toMatch(/Accept/);
    for (const link of ['/admin', '/docs', '/openapi.json'])
      expect(res.text).toContain(`href="${link}"`);
    expect(res.text).toContain('npx sluice login --url');
    expect(res.text).toContain('docs/api.md');
    // Its inline style and script run because the CSP names their hashes, and nothing else does.
    const csp = res.headers.get('content-security-policy')!;
    for (const tag of ['style', 'script']) {
      const body = new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`).exec(res.text)![1];
      expect(csp).toContain(`'sha256-${createHash('sha256').update(body).digest('base64')}'`);
    }
    expect(csp).toMatch(/default-src 'none'/);
  });

  it('answers an API client, or a client that names no type, with the JSON 404', async () => {
    // fetch sends */* when it is told nothing, as curl does.
    for (const accept of ['application/json', '*/*', 'application/json, text/html;q=0.5']) {
      const res = await request(undefined, { method: 'GET', path: '/', headers: { accept } });
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(res.json).toEqual({
        status: {
          reason: expect.stringMatching(/^Cannot GET \//),
          sql_state: '42704',
          vendor_code: -104,
        },
      });
    }
  });
});

/**
 * A cluster deployment of this spec's own — an api at info level, an api at debug level, a worker
 * and a Redis server it may stop — with a fast heartbeat, so that readiness can be watched going
 * down and up without disturbing the rest of the suite. Loopback only. The info api answers only
 * the names SLUICE_ALLOWED_HOSTS lists; the debug api, without it, answers any (and warns).
 */
describe('a deployment of its own', () => {
  const admin = {
    user: `ops_admin_${randomBytes(3).toString('hex')}`,
    password: randomBytes(9).toString('base64url'),
  };
  const processes: ServiceProcess[] = [];
  const db = new Pool({ connectionString: testDatabaseUrl, max: 1 });
  let redisServer: ChildProcess | undefined;
  let env: Record<string, string>;
  let info: ServiceProcess;
  let debug: ServiceProcess;
  let worker: ServiceProcess | undefined;
  const urls = { info: '', debug: '', worker: '' };

  const loginTo = async (baseUrl: string): Promise<string> => {
    const res = await fetch(`${baseUrl}/v1/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: admin.user, password: admin.password }),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { access_token: string }).access_token;
  };

  const ready = async (baseUrl: string) => {
    const res = await fetch(`${baseUrl}/health/ready`);
    return { status: res.status, body: (await res.json()) as any };
  };

  beforeAll(async () => {
    const redisPort = await freePort();
    redisServer = spawn(
      'redis-server',
      ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: 'ignore' },
    );
    const probe = new Redis({ port: redisPort, lazyConnect: true, retryStrategy: () => 50 });
    await eventually(async () =>
      (await probe.ping().catch(() => '')) === 'PONG' ? true : undefined,
    );
    probe.disconnect();
    env = {
      ...e2eEnv().local.env,
      REDIS_URL: `redis://127.0.0.1:${redisPort}`,
      SLUICE_JWT_SECRET: randomBytes(24).toString('hex'),
      SLUICE_ADMIN_USER: admin.user,
      SLUICE_ADMIN_PASSWORD: admin.password,
      SLUICE_KEY_PREFIX: `ops-${randomBytes(3).toString('hex')}`,
      SLUICE_WORKER_THREADS: '1',
      SLUICE_WORKER_HEARTBEAT_MS: '300',
      HOST: '127.0.0.1',
    };
    const [infoPort, debugPort] = [await freePort(), await freePort()];
    // The info api answers only the names it lists; the debug api, without the setting, any.
    info = startProcess('api', {
      ...env,
      PORT: String(infoPort),
      LOG_LEVEL: 'info',
      SLUICE_ALLOWED_HOSTS: 'sluice.test, 127.0.0.1',
    });
    debug = startProcess('api', { ...env, PORT: String(debugPort), LOG_LEVEL: 'debug' });
    processes.push(info, debug);
    urls.info = `http://127.0.0.1:${infoPort}`;
    urls.debug = `http://127.0.0.1:${debugPort}`;
    await Promise.all([waitForApi(urls.info, info, 60_000), waitForApi(urls.debug, debug, 60_000)]);
  });

  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    if (redisServer && redisServer.exitCode === null && redisServer.signalCode === null) {
      const exited = once(redisServer, 'exit');
      redisServer.kill('SIGKILL');
      await exited;
    }
    await db.query('DELETE FROM sluice.users WHERE username = $1', [admin.user]);
    await db.end();
  });

  it('is not ready while no worker has ever beaten, and says so', async () => {
    const { status, body } = await ready(urls.info);
    expect(status).toBe(503);
    expect(body.status).toMatchObject({ sql_state: '57P03', vendor_code: -109 });
    expect(body.status.reason).toMatch(/^not ready: workers: no worker seen in the last 900 ms/);
    expect(body.checks.redis.ok).toBe(true);
    expect(body.checks.database.ok).toBe(true);
    expect(body.checks.workers.ok).toBe(false);
  });

  it('becomes ready once a worker beats; the worker serves its own readiness and metrics', async () => {
    const metricsPort = await freePort();
    worker = startProcess('worker', { ...env, SLUICE_WORKER_METRICS_PORT: String(metricsPort) });
    processes.push(worker);
    urls.worker = `http://127.0.0.1:${metricsPort}`;
    await eventually(
      async () => ((await ready(urls.info)).status === 200 ? true : undefined),
      30_000,
    );
    const own = await eventually(async () => {
      const got = await ready(urls.worker).catch(() => undefined);
      return got?.status === 200 ? got : undefined;
    }, 30_000);
    expect(Object.keys(own.body.checks).sort()).toEqual(['database', 'heartbeat', 'pool', 'redis']);
    expect(own.body.status.vendor_code).toBe(0);
    const live = await fetch(`${urls.worker}/health/live`);
    expect(live.status).toBe(200);
    const missing = await fetch(`${urls.worker}/nope`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as any).status.vendor_code).toBe(-104);

    const before = await scrape(urls.worker);
    // SLUICE_WORKER_THREADS 1, both lanes: one interactive thread and one export thread of its own.
    expect(sample(before, 'sluice_pool_threads')).toBe(2);
    expect(sample(before, 'sluice_pool_capacity')).toBeGreaterThanOrEqual(1);
    // The worker's first scrape: the event-loop delay (see above) has been timed since it started.
    expect(sample(before, 'nodejs_eventloop_lag_p99_seconds')).toBeGreaterThan(0.005);
    expect(sample(before, 'nodejs_eventloop_lag_p99_seconds')).toBeLessThan(5);
    const token = await loginTo(urls.info);
    const res = await fetch(`${urls.info}/v1/execute`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ statement: 'select g from generate_series(1, 5) g' }),
    });
    expect(res.status).toBe(200);
    await res.text();
    // BullMQ marks the job completed a moment after the client has its last byte.
    const after = await eventually(async () => {
      const text = await scrape(urls.worker);
      return sample(text, 'sluice_queue_jobs', { state: 'completed' }) >= 1 ? text : undefined;
    });
    expect(sample(after, 'sluice_pool_tasks_completed_total')).toBeGreaterThan(
      sample(before, 'sluice_pool_tasks_completed_total'),
    );
    expect(sample(after, 'sluice_pool_utilization')).toBeGreaterThan(0);
    expect(sample(after, 'sluice_queue_jobs', { state: 'completed' })).toBeGreaterThanOrEqual(1);
  });

  it('logs one JSON line per execute request, with no secret in it; the statement only at debug', async () => {
    const secret = `param-${randomBytes(4).toString('hex')}`;
    const body = { statement: 'select {v}::text as v, 1 as one', params: { v: secret } };
    const credentials = basic(admin.user, admin.password);
    const ids: Record<'info' | 'debug', string> = { info: '', debug: '' };
    for (const which of ['info', 'debug'] as const) {
      const res = await fetch(`${urls[which]}/v1/execute`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: credentials },
        body: JSON.stringify(body),
      });
      expect(res.status).toBe(200);
      ids[which] = ((await res.json()) as { query_id: string }).query_id;
    }
    const token = await loginTo(urls.info);
    const lines = (proc: ServiceProcess) =>
      proc
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, any>);
    for (const which of ['info', 'debug'] as const) {
      const proc = which === 'info' ? info : debug;
      const line = await eventually(async () =>
        Promise.resolve(lines(proc).find((l) => l.msg === 'execute' && l.query_id === ids[which])),
      );
      // Every field docs/architecture.md lists, and nothing else.
      expect(Object.keys(line).sort()).toEqual([...EXECUTE_LINE_FIELDS].sort());
      expect(line).toMatchObject({
        level: 30,
        msg: 'execute',
        context: 'ExecuteRequest',
        request_id: expect.anything(),
        query_id: ids[which],
        user: admin.user,
        database: 'test',
        format: 'json',
        lane: 'interactive',
        outcome: 'succeeded',
        http_status: 200,
        sql_state: '00000',
        vendor_code: 0,
        rows: 1,
        bytes: expect.any(Number),
        duration_ms: expect.any(Number),
        // From the record the query's end left in the registry: when the worker started it.
        queue_wait_ms: expect.any(Number),
        run_ms: expect.any(Number),
      });
      expect(
        lines(proc).filter((l) => l.query_id === ids[which] && l.msg === 'execute'),
      ).toHaveLength(1);
      const output = proc.output();
      for (const hidden of [secret, admin.password, credentials.slice(6), token]) {
        expect(output).not.toContain(hidden);
      }
    }
    // Other routes get pino-http's access line (headers redacted); execute requests only theirs.
    const access = await eventually(async () =>
      Promise.resolve(lines(info).find((l) => l.req?.url === '/v1/login')),
    );
    expect(access).toMatchObject({ req: { method: 'POST' }, res: { statusCode: 200 } });
    expect(lines(info).some((l) => String(l.req?.url).startsWith('/v1/execute'))).toBe(false);
    expect(lines(info).some((l) => l.msg === 'execute statement')).toBe(false);
    expect(info.output()).not.toContain('select {v}::text');
    const statement = lines(debug).find(
      (l) => l.msg === 'execute statement' && l.query_id === ids.debug,
    );
    expect(statement).toMatchObject({ level: 20, statement: body.statement });
  });

  it('logs how each query ended: failed with its SQLSTATE, cancelled when the client left', async () => {
    const credentials = basic(admin.user, admin.password);
    const post = (statement: string, signal?: AbortSignal) =>
      fetch(`${urls.info}/v1/execute`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: credentials },
        // A row a batch: the first is sent while the others are still being read.
        body: JSON.stringify({ statement, fetch_size: 1 }),
        signal,
      });
    const failed = await post('select 1/0');
    const failedId = ((await failed.json()) as { query_id: string }).query_id;
    // A stream the client leaves after its first bytes.
    const leaving = new AbortController();
    const left = await post(
      'select g, pg_sleep(0.1) from generate_series(1, 100) g',
      leaving.signal,
    );
    expect(left.status).toBe(200);
    const leftId = left.headers.get('x-query-id')!;
    await left.body!.getReader().read();
    leaving.abort();
    const lineOf = (queryId: string) =>
      eventually(async () =>
        Promise.resolve(
          info
            .output()
            .split('\n')
            .filter((l) => l.startsWith('{'))
            .map((l) => JSON.parse(l) as Record<string, any>)
            .find((l) => l.msg === 'execute' && l.query_id === queryId),
        ),
      );
    const failedLine = await lineOf(failedId);
    expect(Object.keys(failedLine).sort()).toEqual([...EXECUTE_LINE_FIELDS].sort());
    expect(failedLine).toMatchObject({
      outcome: 'failed',
      http_status: failed.status,
      sql_state: '22012',
      rows: 0,
    });
    expect(await lineOf(leftId)).toMatchObject({ outcome: 'cancelled', http_status: 200 });
  });

  it('refuses a name SLUICE_ALLOWED_HOSTS does not list with 421 before authentication, on execute, login and the admin pages; answers the names it lists, and probes whatever the Host', async () => {
    const port = new URL(urls.info).port;
    // A page on a name rebound to the api's address: the browser sends that name as Host.
    const attacker = `attacker.example:${port}`;
    const send = (host: string, requestLine: string, lines: string[] = [], body = '') =>
      rawExchange(urls.info, rawRequestText(requestLine, lines, body, host));
    const json = 'Content-Type: application/json';
    const credentials = `Authorization: ${basic(admin.user, admin.password)}`;
    const expectRefused = (res: RawAnswer, named = `Host "${attacker}"`) => {
      expect(res.status).toBe(421);
      expect(res.json).toEqual({
        status: {
          reason: `${named} is not allowed: this service does not answer to that name (SLUICE_ALLOWED_HOSTS)`,
          sql_state: '42501',
          vendor_code: -704,
        },
      });
    };
    const statement = JSON.stringify({ statement: 'select 1 as one' });
    // With the administrator's credentials, and with none: 421 either way, never 401.
    expectRefused(
      await send(attacker, 'POST /v1/execute HTTP/1.1', [json, credentials], statement),
    );
    expectRefused(await send(attacker, 'POST /v1/execute HTTP/1.1', [json], statement));
    // Ahead of the cross-site check (403), which a foreign page's request would also fail.
    expectRefused(
      await send(
        attacker,
        'POST /v1/execute HTTP/1.1',
        [json, credentials, 'Origin: http://evil.example', 'Sec-Fetch-Site: cross-site'],
        statement,
      ),
    );
    expectRefused(
      await send(attacker, `GET /v1/execute?statement=select+1 HTTP/1.1`, [credentials]),
    );
    for (const path of ['/admin', '/admin/queues', '/admin/api/queries', '/docs', '/v1/info']) {
      expectRefused(await send(attacker, `GET ${path} HTTP/1.1`));
    }
    // More wrong passwords than SLUICE_LOGIN_MAX_FAILURES (5): refused before they are counted.
    const wrong = JSON.stringify({ username: admin.user, password: 'wrong-password' });
    for (let i = 0; i < 6; i++) {
      expectRefused(await send(attacker, 'POST /v1/login HTTP/1.1', [json], wrong));
    }
    // The name passed on by a proxy counts too; a request without Host names none (HTTP/1.0).
    expectRefused(
      await send('127.0.0.1', 'GET /v1/info HTTP/1.1', [`X-Forwarded-Host: ${attacker}`]),
      `X-Forwarded-Host "${attacker}"`,
    );
    const hostless = await rawExchange(urls.info, 'GET /v1/info HTTP/1.0\r\n\r\n');
    expect(hostless.status).toBe(421);
    expect(hostless.json.status.reason).toMatch(/^the request has no Host header: /);
    // HTTP/1.1 requires Host: Node refuses such a request itself.
    const hostless11 = await rawExchange(
      urls.info,
      'GET /v1/info HTTP/1.1\r\nConnection: close\r\n\r\n',
    );
    expect(hostless11.status).toBe(400);

    // The names it lists, in any case and with a trailing dot, on any port.
    const right = JSON.stringify({ username: admin.user, password: admin.password });
    const login = await send(`SLUICE.test.:${port}`, 'POST /v1/login HTTP/1.1', [json], right);
    expect(login.status).toBe(200);
    const token = login.json.access_token as string;
    const ran = await send(
      'sluice.test',
      'POST /v1/execute HTTP/1.1',
      [json, `Authorization: Bearer ${token}`],
      statement,
    );
    expect(ran.status).toBe(200);
    expect(ran.json.data).toEqual([[1]]);
    expect((await send(`127.0.0.1:${port}`, 'GET /admin HTTP/1.1')).status).toBe(200);

    // Probes and scrapers reach a process by its address, whatever name it has.
    for (const path of ['/health/live', '/health/ready', '/metrics']) {
      expect({
        path,
        status: (await send('10.1.2.3:8080', `GET ${path} HTTP/1.1`)).status,
      }).toEqual({ path, status: 200 });
    }

    // So does a worker's port, which serves nothing else.
    const workerProbe = await rawExchange(
      urls.worker,
      rawRequestText('GET /health/live HTTP/1.1', [], '', '10.1.2.3:9464'),
    );
    expect(workerProbe.status).toBe(200);

    // Without the setting (cluster mode), an api answers any name, and says at start-up why not to.
    const debugPort = new URL(urls.debug).port;
    const open = await rawExchange(
      urls.debug,
      rawRequestText('GET /v1/info HTTP/1.1', [], '', `attacker.example:${debugPort}`),
    );
    expect(open.status).toBe(200);
    const warnings = (proc: ServiceProcess) =>
      proc
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, any>)
        .filter((l) => l.level === 40 && /SLUICE_ALLOWED_HOSTS/.test(String(l.msg)));
    expect(warnings(debug)).toEqual([
      expect.objectContaining({
        context: 'Api',
        msg: expect.stringMatching(/^SLUICE_ALLOWED_HOSTS is not set: .*\(DNS rebinding\)/),
      }),
    ]);
    expect(warnings(info)).toEqual([]);
  });

  it('is not ready as soon as its only worker stops', async () => {
    await worker!.stop('SIGTERM');
    const { body } = await eventually(async () => {
      const got = await ready(urls.info);
      return got.status === 503 ? got : undefined;
    }, 5_000);
    expect(body.checks.workers.ok).toBe(false);
    expect(body.checks.redis.ok).toBe(true);
  });

  it('names Redis when it is down, and still answers in time', async () => {
    const exited = once(redisServer!, 'exit');
    redisServer!.kill('SIGKILL');
    await exited;
    const started = Date.now();
    const { status, body } = await ready(urls.info);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(status).toBe(503);
    expect(body.checks.redis.ok).toBe(false);
    expect(body.status.reason).toMatch(/redis/);
    expect(body.checks.database.ok).toBe(true);
  });
});
