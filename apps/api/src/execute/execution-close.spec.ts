import { Logger } from '@nestjs/common';
import { Readable } from 'node:stream';
import { KeptResultService } from '../queries/kept-result.service';
import { ProducerWatch } from '../queries/producer.watch';
import Fastify, { FastifyInstance, FastifyReply } from 'fastify';
import Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { ClientRequest, IncomingMessage, request as httpRequest } from 'node:http';
import { AddressInfo } from 'node:net';
import { LANES, ResultRecord, okStatus } from '@app/contracts';
import { ExecuteRequestDto } from '@app/http-contracts';
import { QueryLifecycle } from '@app/execution';
import { SluiceConfig, loadConfig } from '@app/config';
import {
  RedisConnector,
  RedisKeys,
  RedisQueryRegistry,
  RedisResultSink,
  RedisResultSource,
  workerBeat,
} from '@app/transport';
import { BullmqJobQueue } from '@app/queue';
import { TimerTracker, trackTimers } from '@test/support/active-timers';
import { AuthUser } from '../auth/auth-user';
import { ExecutePolicyService } from '../auth/execute-policy.service';
import { WorkerRosterService } from '../health/worker-roster.service';
import { ExecuteController, send } from './execute.controller';
import { AdmissionService } from './admission.service';
import { ExecuteService } from './execute.service';
import { ExecutionResponse } from './execution.response';
import { testRedisUrl } from '@test/settings';

/**
 * Whatever way a response ends, its execution's reader is released — its blocking Redis
 * connection, its keep-alive interval — and an unfinished query is cancelled at once. Real
 * Fastify, real Redis, the real ExecuteService and controller; this test plays the worker by
 * writing the query's stream records itself.
 */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const user: AuthUser = { username: 'closer', role: 'r', isAdmin: false, readOnly: false };
const body: ExecuteRequestDto = { statement: 'select 1' };
const NDJSON = 'application/stream+json';

jest.setTimeout(20_000);

let redis: Redis;
let keys: RedisKeys;
let config: SluiceConfig;
let queue: BullmqJobQueue;
let registry: RedisQueryRegistry;
let source: RedisResultSource;
let sink: RedisResultSink;
let service: ExecuteService;
let app: FastifyInstance;
let baseUrl: string;
let tracker: TimerTracker;
/** What the route does with the request; set by each test. */
let route: (reply: FastifyReply, accept: string | undefined) => Promise<unknown>;

async function until(check: () => Promise<boolean> | boolean, ms: number): Promise<number> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > ms) throw new Error(`not within ${ms} ms`);
    await sleep(10);
  }
  return Date.now() - started;
}

const seen = new Set<string>();

/** The query the service just queued (read back as the worker would take it). */
async function queuedQuery(): Promise<string> {
  let id: string | undefined;
  await until(async () => {
    const jobs = await queue.queues.interactive.getJobs(['waiting', 'prioritized']);
    id = jobs.map((job) => job.data.queryId).find((queryId) => !seen.has(queryId));
    return id !== undefined;
  }, 5000);
  seen.add(id!);
  return id!;
}

/** Plays the worker: appends a record to the query's stream (no flow control). */
function write(queryId: string, record: ResultRecord): Promise<void> {
  return sink.end(queryId, record);
}

const head = (): ResultRecord => ({
  kind: 'head',
  columns: [{ name: 'n', type: 'integer' }],
  bytes: Buffer.from('{"query_id":"q","schema":[{"name":"n","type":"integer"}]}\n'),
});
const data = (): ResultRecord => ({
  kind: 'data',
  rows: 1,
  bytes: Buffer.from('{"data":[[1]]}\n'),
});

/** The reader connections Redis sees for this source, and which are blocked in a command. */
async function readers(): Promise<{ all: number; blocked: number }> {
  const list = (await redis.client('LIST')) as string;
  const mine = list.split('\n').filter((l) => l.includes(` name=${source.connectionName} `));
  return { all: mine.length, blocked: mine.filter((l) => / flags=\S*b/.test(l)).length };
}

/** Starts a request; resolves with the client request and (once it comes) its response. */
function post(accept = NDJSON): { req: ClientRequest; response: Promise<IncomingMessage> } {
  const req = httpRequest(`${baseUrl}/v1/execute`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept },
  });
  // The test destroys the request on purpose.
  req.on('error', () => undefined);
  const response = once(req, 'response').then(([res]) => res as IncomingMessage);
  // A test that destroys the request never awaits its response: its failure is expected.
  response.catch(() => undefined);
  req.end(JSON.stringify(body));
  return { req, response };
}

beforeAll(async () => {
  redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
  keys = new RedisKeys(`close-spec-${randomBytes(4).toString('hex')}`);
  config = loadConfig({
    testRedisUrl,
    SLUICE_KEY_PREFIX: keys.prefix,
    SLUICE_PRODUCER_SILENCE_MS: '5000',
  });
  queue = new BullmqJobQueue(redis.duplicate(), keys, { seconds: 60, count: 1000 });
  registry = new RedisQueryRegistry(redis, keys, { seconds: 60, count: 1000 });
  source = new RedisResultSource(redis, keys, {
    connector: new RedisConnector({ mode: 'single', url: testRedisUrl }),
    silenceMs: config.producerSilenceMs,
    ttlSeconds: 60,
  });
  sink = new RedisResultSink(redis, keys, 60);
  const policy = { check: () => Promise.resolve() } as unknown as ExecutePolicyService;
  const roster = new WorkerRosterService(config, redis);
  const watch = new ProducerWatch(queue, roster, new Logger(ProducerWatch.name));
  const lifecycle = new QueryLifecycle(registry);
  service = new ExecuteService(
    queue,
    source,
    lifecycle,
    config,
    policy,
    new AdmissionService(queue, registry, config, roster),
    roster,
    watch,
    registry,
    new KeptResultService(registry, source, queue, sink, lifecycle, watch, config, null),
    null,
  );
  const controller = new ExecuteController(service);
  app = Fastify();
  app.post('/v1/execute', (req, reply) =>
    route(reply, req.headers.accept).catch(() => {
      // The client is gone: nothing to answer.
    }),
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  // A worker's heartbeat: the service refuses queries while no worker is alive.
  await redis.hset(keys.workers, 'spec-worker', workerBeat(Date.now() + 3_600_000, LANES));
  route = (reply, accept) =>
    controller.post(body, user, { accept, 'content-type': 'application/json' }, reply);
});

beforeEach(async () => {
  // One request first, so that the source's pool holds a ready connection and what the tests
  // count is the request's doing, not a connection being set up.
  const { response } = post();
  const queryId = await queuedQuery();
  await write(queryId, head());
  await write(queryId, { kind: 'end', status: okStatus(), bytes: Buffer.from('{"status":{}}\n') });
  const res = await response;
  res.resume();
  await once(res, 'end');
  await until(() => source.stats.open === 0, 2000);
  tracker = trackTimers();
});

afterEach(() => tracker.stop());

afterAll(async () => {
  await app.close();
  await source.close();
  await queue.queues.interactive.obliterate({ force: true });
  await queue.queues.export.obliterate({ force: true });
  await redis.del(keys.queries);
  await queue.close();
  await redis.del(keys.workers);
  await redis.quit();
});

/** After a response ended early: nothing of its execution is left, and its query is cancelled. */
async function expectReleased(queryId: string): Promise<void> {
  await until(() => source.stats.open === 0, 2000);
  expect(await readers()).toEqual({ all: source.stats.connections, blocked: 0 });
  expect(await redis.exists(keys.alive(queryId))).toBe(0);
  expect(await redis.get(keys.cancel(queryId))).toBe('1');
  expect(await registry.get(queryId)).toMatchObject({
    state: 'cancelled',
    status: { reason: 'client went away' },
  });
  expect(await redis.zscore(keys.userSlots(user.username), queryId)).toBeNull();
  expect(tracker.stacks()).toEqual([]);
}

describe('an execution whose response ends early', () => {
  it('is released when the response is destroyed before the body is first read', async () => {
    const controllerRoute = route;
    let executed!: (result: ExecutionResponse) => void;
    const started = new Promise<ExecutionResponse>((resolve) => (executed = resolve));
    route = async (reply, accept) => {
      // The service answers first; the client leaves before the body is handed to the reply.
      const result = await service.execute(body, user, { accept });
      executed(result);
      if (!reply.raw.destroyed) await once(reply.raw, 'close');
      return send(reply, result);
    };
    try {
      const { req } = post();
      const queryId = await queuedQuery();
      await write(queryId, head());
      const result = await started;
      req.destroy();
      await expectReleased(queryId);
      // The body's generator never ran: what released the reader was the response's close.
      expect((result.body as Readable).readableDidRead).toBe(false);
    } finally {
      route = controllerRoute;
    }
  });

  it('is released at once when the response is destroyed while the body waits for a record', async () => {
    const { req, response } = post();
    const queryId = await queuedQuery();
    await write(queryId, head());
    await write(queryId, data());
    const res = await response;
    let received = '';
    res.on('data', (chunk: Buffer) => (received += chunk.toString()));
    // Both lines are out: the body now waits in XREAD for a record that will not come.
    await until(() => received.includes('"data"'), 2000);
    await until(async () => (await readers()).blocked === 1, 2000);
    const destroyedAt = Date.now();
    req.destroy();
    await until(async () => (await redis.get(keys.cancel(queryId))) === '1', 1000);
    expect(Date.now() - destroyedAt).toBeLessThan(1000);
    await expectReleased(queryId);
  });

  it('is released, and its slot given back, when the response ends whole', async () => {
    const { response } = post();
    const queryId = await queuedQuery();
    await write(queryId, head());
    await write(queryId, {
      kind: 'end',
      status: okStatus(),
      bytes: Buffer.from('{"status":{}}\n'),
    });
    const res = await response;
    let received = '';
    res.on('data', (chunk: Buffer) => (received += chunk.toString()));
    await once(res, 'end');
    expect(received).toContain('"status"');
    await until(() => source.stats.open === 0, 2000);
    expect(await readers()).toEqual({ all: source.stats.connections, blocked: 0 });
    expect(await registry.get(queryId)).toMatchObject({ state: 'succeeded' });
    expect(await redis.zscore(keys.userSlots(user.username), queryId)).toBeNull();
    expect(await redis.exists(keys.cancel(queryId))).toBe(0);
    expect(tracker.stacks()).toEqual([]);
  });
});
