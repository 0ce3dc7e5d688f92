import { randomBytes } from 'node:crypto';
import { OtlpReceiver, ReceivedSpan } from '../support/otlp.receiver';
import { e2eEnv, eventually, execute, login, request } from './support/client';
import { launchChromium, openAdminQueries } from './support/browser';
import { PARQUET, deployment, firstAnswer, startWorker } from './support/lanes';

/**
 * One trace per query: the api and the worker (or standalone mode's one process) export their
 * spans over OTLP/HTTP to a receiver of the test's own, and the spans of one query make one tree
 * from the HTTP server span down to the statement's span on PostgreSQL.
 */
const cluster = e2eEnv().mode === 'cluster';
const stops: (() => Promise<unknown>)[] = [];
let receiver: OtlpReceiver;
let baseUrl: string;
let token: string;
let apiOutput: () => string;

const SERVER = 2;
const CLIENT = 3;
const PRODUCER = 4;
const CONSUMER = 5;
const ERROR = 2;

jest.setTimeout(120_000);

beforeAll(async () => {
  receiver = await OtlpReceiver.start();
  const otel = {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    // The SDK's own setting: batches leave every 100 ms rather than every 5 s.
    OTEL_BSP_SCHEDULE_DELAY: '100',
    SLUICE_TRACE_STATEMENTS: 'true',
    SLUICE_TRACE_SQLCOMMENTER: 'true',
    SLUICE_TRACE_URL: 'https://traces.example/trace/{trace_id}',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=e2e,team=sql%20ops',
  };
  const started = await deployment(otel, stops);
  baseUrl = started.api.baseUrl;
  apiOutput = started.api.output;
  if (cluster) {
    const worker = startWorker(started.prefix, otel);
    stops.push(() => worker.stop());
  }
  token = await login();
  await firstAnswer(baseUrl, token);
});

afterAll(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
  await receiver.close();
});

/** The query's trace id as GET /v1/queries/{id} shows it. */
async function traceIdOf(queryId: string): Promise<string> {
  const info = await request(undefined, {
    method: 'GET',
    path: `/v1/queries/${queryId}`,
    token,
    baseUrl,
  });
  expect(info.status).toBe(200);
  const traceId = info.json.trace_id as string;
  expect(traceId).toMatch(/^[0-9a-f]{32}$/);
  return traceId;
}

/** Waits for the trace's spans until `done` holds of them. */
function spansOf(
  traceId: string,
  done: (spans: ReceivedSpan[]) => boolean,
): Promise<ReceivedSpan[]> {
  return eventually(() => {
    const spans = receiver.trace(traceId);
    return Promise.resolve(done(spans) ? spans : undefined);
  }, 15_000);
}

/** A query's trace is whole once its HTTP span and its PostgreSQL span have both come. */
const whole = (spans: ReceivedSpan[]) =>
  spans.some((s) => s.kind === SERVER) && spans.some((s) => s.kind === CLIENT);

/** From `span` up to the root: the chain of its parents within the trace. */
function ancestry(span: ReceivedSpan, spans: ReceivedSpan[]): ReceivedSpan[] {
  const chain = [span];
  for (;;) {
    const parent = spans.find((s) => s.spanId === chain[chain.length - 1].parentSpanId);
    if (!parent) return chain;
    chain.push(parent);
  }
}

describe('tracing', () => {
  it('makes one trace of a query, from the HTTP span through the queue to the statement on PostgreSQL, with no parameter value in any span', async () => {
    const secret = `secret-${randomBytes(6).toString('hex')}`;
    const res = await execute(
      {
        statement: 'select n, {secret}::text as s from generate_series(1, 3) n',
        params: { secret },
      },
      { token, baseUrl },
    );
    expect(res.status).toBe(200);
    const traceId = await traceIdOf(res.json.query_id as string);
    const spans = await spansOf(
      traceId,
      (s) => whole(s) && s.some((x) => x.name === 'stream result'),
    );
    const statement = spans.find((s) => s.kind === CLIENT)!;
    expect(statement).toMatchObject({
      name: 'SELECT',
      attributes: {
        'db.system.name': 'postgresql',
        'db.namespace': e2eEnv().defaultDatabase,
        'db.operation.name': 'SELECT',
        'db.response.returned_rows': 3,
        // The text with its placeholder, never the value bound to it.
        'db.query.text': 'select n, $1::text as s from generate_series(1, 3) n',
      },
    });
    const chain = ancestry(statement, spans).map((s) => [s.kind, s.name]);
    expect(chain).toEqual([
      [CLIENT, 'SELECT'],
      [CONSUMER, 'process execute'],
      [PRODUCER, 'send execute'],
      [SERVER, 'POST /v1/execute'],
    ]);
    const services = new Set(spans.map((s) => s.service));
    expect([...services].sort()).toEqual(cluster ? ['sluice-api', 'sluice-worker'] : ['sluice']);
    // OTEL_RESOURCE_ATTRIBUTES describe every process's spans.
    for (const span of spans) {
      expect(span.resource).toMatchObject({
        'deployment.environment.name': 'e2e',
        team: 'sql ops',
      });
    }
    const names = spans.map((s) => s.name);
    expect(names).toEqual(
      expect.arrayContaining(['admission', 'queue wait', 'encode result', 'stream result']),
    );
    const encode = spans.find((s) => s.name === 'encode result')!;
    expect(encode.parentSpanId).toBe(statement.spanId);
    expect(encode.attributes).toMatchObject({ 'sluice.rows': 3, 'sluice.format': 'json' });
    expect(Number(encode.attributes['sluice.bytes'])).toBeGreaterThan(0);
    expect(spans.find((s) => s.name === 'stream result')!.attributes['sluice.rows']).toBe(3);
    for (const body of receiver.bodies) expect(body).not.toContain(secret);
    // The request's log line names its trace.
    const line = await eventually(() =>
      Promise.resolve(
        apiOutput()
          .split('\n')
          .find((l) => l.includes('"msg":"execute"') && l.includes(res.json.query_id as string)),
      ),
    );
    expect(JSON.parse(line)).toMatchObject({ trace_id: traceId });
  });

  it('links a query on the admin page to its trace (SLUICE_TRACE_URL)', async () => {
    const res = await execute({ statement: 'select 3 as linked' }, { token, baseUrl });
    expect(res.status).toBe(200);
    const queryId = res.json.query_id as string;
    const traceId = await traceIdOf(queryId);
    const { adminUser, adminPassword } = e2eEnv();
    const browser = await launchChromium();
    try {
      const tab = await browser.newPage();
      await openAdminQueries(tab, baseUrl, { user: adminUser, password: adminPassword });
      await tab.locator(`tr[data-query-id="${queryId}"] td`).nth(10).click();
      const link = tab.locator('#detail a.trace');
      await link.waitFor();
      expect(await link.getAttribute('href')).toBe(`https://traces.example/trace/${traceId}`);
      expect(await tab.locator('#detail-facts').textContent()).toContain(traceId);
    } finally {
      await browser.close();
    }
  });

  it('continues the trace of an incoming traceparent', async () => {
    const traceId = randomBytes(16).toString('hex');
    const parent = randomBytes(8).toString('hex');
    const res = await execute(
      { statement: 'select 1 as one' },
      {
        token,
        baseUrl,
        headers: { traceparent: `00-${traceId}-${parent}-01`, tracestate: 'e2e=1' },
      },
    );
    expect(res.status).toBe(200);
    expect(await traceIdOf(res.json.query_id as string)).toBe(traceId);
    const spans = await spansOf(traceId, whole);
    expect(spans.find((s) => s.kind === SERVER)!.parentSpanId).toBe(parent);
    // Its tracestate too, through the job's data to the worker's spans.
    for (const kind of [SERVER, PRODUCER, CONSUMER, CLIENT]) {
      expect([kind, spans.find((s) => s.kind === kind)!.traceState]).toEqual([kind, 'e2e=1']);
    }
  });

  it('obeys an incoming traceparent that is not sampled: no span, no trace id', async () => {
    const traceId = randomBytes(16).toString('hex');
    const res = await execute(
      { statement: 'select 1 as unsampled' },
      {
        token,
        baseUrl,
        headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-00` },
      },
    );
    expect(res.status).toBe(200);
    // A sampled query sent after it, whose spans have come: the batch of the first went too.
    const later = await execute({ statement: 'select 2 as sampled' }, { token, baseUrl });
    await spansOf(await traceIdOf(later.json.query_id as string), whole);
    const info = await request(undefined, {
      method: 'GET',
      path: `/v1/queries/${res.json.query_id as string}`,
      token,
      baseUrl,
    });
    expect(info.json.trace_id).toBeNull();
    expect(receiver.trace(traceId)).toEqual([]);
  });

  it('puts the statement span traceparent in the statement as a sqlcommenter comment', async () => {
    const res = await execute({ statement: 'select current_query() as query' }, { token, baseUrl });
    expect(res.status).toBe(200);
    const traceId = await traceIdOf(res.json.query_id as string);
    const statement = (await spansOf(traceId, whole)).find((s) => s.kind === CLIENT)!;
    const [[text]] = res.json.data as string[][];
    expect(text).toContain(`/*traceparent='00-${traceId}-${statement.spanId}-01'*/`);
  });

  it('sets the status of a failed statement with its SQLSTATE and vendor code', async () => {
    const res = await execute({ statement: 'select * from no_such_table_e2e' }, { token, baseUrl });
    expect(res.status).toBe(400);
    const traceId = await traceIdOf(res.json.query_id as string);
    const spans = await spansOf(traceId, whole);
    for (const span of [
      spans.find((s) => s.kind === CLIENT)!,
      spans.find((s) => s.kind === CONSUMER)!,
    ]) {
      expect(span.status.code).toBe(ERROR);
      expect(span.attributes).toMatchObject({
        'db.response.status_code': '42P01',
        'error.type': '42P01',
        'sluice.vendor_code': -600,
      });
    }
    expect(spans.find((s) => s.kind === SERVER)!.attributes).toMatchObject({
      'http.response.status_code': 400,
      'sluice.sql_state': '42P01',
    });
  });

  it("leaves out the query string and a failure's reason, which may quote a value; the server span is no error for a 4xx", async () => {
    // PostgreSQL's message quotes the value it could not take: "invalid input syntax … "secret-…"".
    const secret = `secret-${randomBytes(6).toString('hex')}`;
    const query = new URLSearchParams({
      statement: 'select {v}::int as n',
      params: JSON.stringify({ v: secret }),
    });
    const res = await request(undefined, {
      method: 'GET',
      path: `/v1/execute?${query.toString()}`,
      token,
      baseUrl,
    });
    expect(res.status).toBe(400);
    expect((res.json as { status: { reason: string } }).status.reason).toContain(secret);
    const traceId = await traceIdOf((res.json as { query_id: string }).query_id);
    const spans = await spansOf(traceId, whole);
    for (const kind of [CLIENT, CONSUMER]) {
      const span = spans.find((s) => s.kind === kind)!;
      expect(span.status.code).toBe(ERROR);
      expect(span.attributes).toMatchObject({ 'error.type': '22P02' });
    }
    const server = spans.find((s) => s.kind === SERVER)!;
    expect(server.attributes).toMatchObject({
      'http.request.method': 'GET',
      'url.path': '/v1/execute',
      'http.response.status_code': 400,
    });
    expect(server.status.code).not.toBe(ERROR);
    for (const body of receiver.bodies) expect(body).not.toContain(secret);
  });

  it('ends a cancelled statement span with the cancel', async () => {
    const controller = new AbortController();
    const statement = `select pg_sleep(30) as "${randomBytes(4).toString('hex')}"`;
    const sent = fetch(`${baseUrl}/v1/execute`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ statement }),
      signal: controller.signal,
    }).catch(() => undefined);
    // Running once its span has started: its query is found by its statement.
    const running = await eventually(async () => {
      const list = await request(undefined, { method: 'GET', path: '/v1/queries', token, baseUrl });
      const found = (
        list.json as unknown as { query_id: string; statement: string; state: string }[]
      ).find((q) => q.statement === statement && q.state === 'running');
      return found?.query_id;
    }, 15_000);
    controller.abort();
    await sent;
    const traceId = await traceIdOf(running);
    const spans = await spansOf(traceId, whole);
    const span = spans.find((s) => s.kind === CLIENT)!;
    expect(span.status.code).toBe(ERROR);
    expect(span.attributes).toMatchObject({
      'db.response.status_code': '57014',
      'sluice.vendor_code': -900,
    });
  });

  it('traces a Parquet export through the export lane', async () => {
    const res = await execute(
      { statement: 'select n from generate_series(1, 1000) n' },
      { token, baseUrl, headers: PARQUET },
    );
    expect(res.status).toBe(200);
    const traceId = await traceIdOf(res.headers.get('x-query-id')!);
    const spans = await spansOf(
      traceId,
      (s) => whole(s) && s.some((x) => x.name === 'encode result'),
    );
    expect(spans.find((s) => s.kind === CONSUMER)!.name).toBe('process execute-export');
    const encode = spans.find((s) => s.name === 'encode result')!;
    expect(encode.attributes).toMatchObject({ 'sluice.format': 'parquet', 'sluice.rows': 1000 });
  });
});

/**
 * A deployment with the statement settings at their defaults, and OTEL_SERVICE_NAME and a trace-id
 * ratio sampler set: TraceIdRatioBasedSampler keeps a trace whose id's four 32-bit words XOR to
 * less than the ratio of 2^32, whatever the parent says, so these ids decide it.
 */
const KEPT_ID = () => `${'0'.repeat(28)}${randomBytes(2).toString('hex')}`;
const DROPPED_ID = () => `${'f'.repeat(8)}${'0'.repeat(20)}${randomBytes(2).toString('hex')}`;

describe('tracing with OTEL_SERVICE_NAME, a ratio sampler, and SLUICE_TRACE_STATEMENTS and SLUICE_TRACE_SQLCOMMENTER at their default (off)', () => {
  const plainStops: (() => Promise<unknown>)[] = [];
  let plainUrl: string;

  beforeAll(async () => {
    const otel = {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_SERVICE_NAME: 'sluice-plain',
      OTEL_TRACES_SAMPLER: 'traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.5',
    };
    const started = await deployment(otel, plainStops);
    plainUrl = started.api.baseUrl;
    if (cluster) {
      const worker = startWorker(started.prefix, otel);
      plainStops.push(() => worker.stop());
    }
    await firstAnswer(plainUrl, token);
  });

  afterAll(async () => {
    await Promise.all(plainStops.splice(0).map((stop) => stop()));
  });

  it('names the operation but puts no statement text in the span, and no comment in the statement', async () => {
    const marker = `m_${randomBytes(4).toString('hex')}`;
    const traceparent = `00-${KEPT_ID()}-${randomBytes(8).toString('hex')}-01`;
    const res = await execute(
      { statement: `select current_query() as ${marker}` },
      { token, baseUrl: plainUrl, headers: { traceparent } },
    );
    expect(res.status).toBe(200);
    const [[text]] = res.json.data as string[][];
    expect(text).toBe(`select current_query() as ${marker}`);
    const info = await request(undefined, {
      method: 'GET',
      path: `/v1/queries/${res.json.query_id as string}`,
      token,
      baseUrl: plainUrl,
    });
    const spans = await spansOf(info.json.trace_id as string, whole);
    const statement = spans.find((s) => s.kind === CLIENT)!;
    expect(statement.attributes['db.operation.name']).toBe('SELECT');
    expect(statement.attributes).not.toHaveProperty('db.query.text');
    for (const span of spans) expect(JSON.stringify(span)).not.toContain(marker);
    // OTEL_SERVICE_NAME names every process.
    expect(new Set(spans.map((span) => span.service))).toEqual(new Set(['sluice-plain']));
  });

  it('samples by OTEL_TRACES_SAMPLER: a trace id past the ratio is dropped, though its parent was sampled', async () => {
    const traceId = DROPPED_ID();
    const res = await execute(
      { statement: 'select 1 as dropped' },
      {
        token,
        baseUrl: plainUrl,
        headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
      },
    );
    expect(res.status).toBe(200);
    // A kept trace sent after it, whose spans have come: the batch of the first went too.
    const kept = KEPT_ID();
    const later = await execute(
      { statement: 'select 2 as kept' },
      {
        token,
        baseUrl: plainUrl,
        headers: { traceparent: `00-${kept}-${randomBytes(8).toString('hex')}-01` },
      },
    );
    expect(later.status).toBe(200);
    await spansOf(kept, whole);
    const info = await request(undefined, {
      method: 'GET',
      path: `/v1/queries/${res.json.query_id as string}`,
      token,
      baseUrl: plainUrl,
    });
    expect(info.json.trace_id).toBeNull();
    expect(receiver.trace(traceId)).toEqual([]);
  });
});
