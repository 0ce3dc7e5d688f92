import { Logger } from '@nestjs/common';
import Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { ExecuteJobData } from '@app/contracts';
import { ExecuteRequestDto } from '@app/http-contracts';
import { QueryLifecycle } from '@app/execution';
import { loadConfig } from '@app/config';
import {
  InProcessJobQueue,
  InProcessQueryRegistry,
  InProcessResultChannel,
  JobQueue,
  QueryRecord,
  QueryRegistry,
  ReaderHooks,
  ResultReader,
  ResultSink,
  ResultSource,
  RedisConnector,
  RedisKeys,
  RedisQueryRegistry,
  RedisResultSink,
  RedisResultSource,
} from '@app/transport';
import { testRedisUrl } from '@test/settings';
import { captureLogs } from '@test/support/captured-logs';
import { AuthUser } from '../auth/auth-user';
import { ExecutePolicyService } from '../auth/execute-policy.service';
import { WorkerRosterService } from '../health/worker-roster.service';
import { KeptResultService } from '../queries/kept-result.service';
import { ProducerWatch } from '../queries/producer.watch';
import { AdmissionService } from './admission.service';
import { ExecuteService } from './execute.service';

/**
 * Admission, the query's record and its reader: asked for together (one write to Redis, where the
 * registry is Redis), the reader's alive key in place before the job can be taken, and none of
 * them left behind by a query that is refused. Over the in-process adapters, with a registry and
 * a channel that tell when each call is made and answered; then over Redis, as an api runs it.
 */
const CAP = 2;
const user: AuthUser = { username: 'ann', role: 'r', isAdmin: false, readOnly: false };
const body: ExecuteRequestDto = { statement: 'select 1' };
const config = loadConfig({ SLUICE_MAX_ACTIVE_PER_USER: String(CAP) });

class WatchedRegistry extends InProcessQueryRegistry {
  readonly events: string[] = [];
  failCreate = false;

  override admit(owner: string, queryId: string, cap: number): Promise<number | undefined> {
    return this.watched('slot', () => super.admit(owner, queryId, cap));
  }

  override create(record: QueryRecord): Promise<void> {
    return this.watched('record', () =>
      this.failCreate ? Promise.reject(new Error('registry down')) : super.create(record),
    );
  }

  private watched<T>(name: string, call: () => Promise<T>): Promise<T> {
    this.events.push(`ask ${name}`);
    return call().finally(() => this.events.push(`answer ${name}`));
  }
}

/** A channel that tells the registry's log when a reader opens and when it closes. */
class WatchedChannel extends InProcessResultChannel {
  constructor(private readonly events: string[]) {
    super(config.producerSilenceMs);
  }

  override open(queryId: string, hooks: ReaderHooks): ResultReader {
    const reader = super.open(queryId, hooks);
    this.events.push('open reader');
    const close = reader.close.bind(reader);
    reader.close = () => {
      this.events.push('close reader');
      return close();
    };
    return reader;
  }

  override openKept(queryId: string, hooks: ReaderHooks): ResultReader {
    this.events.push('open kept reader');
    return super.openKept(queryId, hooks);
  }
}

/** A queue that looks, as a job is added, at what Redis holds then; and then refuses the job. */
class ProbingQueue extends InProcessJobQueue {
  aliveAtEnqueue: number | undefined;

  constructor(
    private readonly probe: Redis,
    private readonly keys: RedisKeys,
  ) {
    super({ seconds: 60, count: 1000 });
  }

  override async enqueue(job: ExecuteJobData): Promise<void> {
    // Another connection, as BullMQ's own is: it sees only what Redis already did.
    this.aliveAtEnqueue = await this.probe.exists(this.keys.alive(job.queryId));
    throw new Error('queue down');
  }
}

const policy = { check: () => Promise.resolve() } as unknown as ExecutePolicyService;
const roster = new WorkerRosterService(config, undefined);

/** The service over the given adapters, every check but admission's passing. */
function serviceOver(
  queue: JobQueue,
  registry: QueryRegistry,
  source: ResultSource,
  sink: ResultSink,
): ExecuteService {
  const lifecycle = new QueryLifecycle(registry);
  const watch = new ProducerWatch(queue, roster, new Logger(ProducerWatch.name));
  return new ExecuteService(
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
}

describe(`${ExecuteService.name} admission`, () => {
  const logs = captureLogs();
  let registry: WatchedRegistry;
  let service: ExecuteService;

  beforeEach(() => {
    registry = new WatchedRegistry({ seconds: 60, count: 1000 });
    const channel = new WatchedChannel(registry.events);
    service = serviceOver(
      new InProcessJobQueue({ seconds: 60, count: 1000 }),
      registry,
      channel,
      channel,
    );
  });

  /** The user's slots taken so far: admitting up to the cap tells how many were free. */
  async function slotsTaken(): Promise<number> {
    let taken = CAP;
    while (
      taken > 0 &&
      (await registry.admit(user.username, `probe-${taken}`, CAP)) !== undefined
    ) {
      taken -= 1;
    }
    return taken;
  }

  it('asks for the slot, the record and the reader together, and a refused query keeps none', async () => {
    await registry.admit(user.username, 'held-1', CAP);
    await registry.admit(user.username, 'held-2', CAP);
    registry.events.length = 0;
    const refused = service.execute(body, user, {});
    await expect(refused).rejects.toMatchObject({ code: 'QUEUE_FULL' });
    // All three were asked for before either was answered: one round trip, not two.
    expect(registry.events.slice(0, 3).sort()).toEqual(['ask record', 'ask slot', 'open reader']);
    expect(registry.events).toContain('close reader');
    const listed = await registry.list(100);
    expect(listed.map((record) => record.queryId)).toEqual([]);
  });

  it('opens no reader for a kept result refused at the cap (it would read over a connection of its own)', async () => {
    await registry.admit(user.username, 'held-1', CAP);
    await registry.admit(user.username, 'held-2', CAP);
    registry.events.length = 0;
    const refused = service.execute({ ...body, resumable: true }, user, {});
    await expect(refused).rejects.toMatchObject({ code: 'QUEUE_FULL' });
    expect(registry.events.sort()).toEqual([
      'answer record',
      'answer slot',
      'ask record',
      'ask slot',
    ]);
  });

  it('gives the slot back when the record cannot be written, and answers 503', async () => {
    registry.failCreate = true;
    await expect(service.execute(body, user, {})).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(registry.events.slice(0, 3).sort()).toEqual(['ask record', 'ask slot', 'open reader']);
    expect(registry.events).toContain('close reader');
    expect(await slotsTaken()).toBe(0);
    expect(logs.lines).toEqual([
      {
        level: 'error',
        context: 'ExecuteService',
        message: expect.stringMatching(/^query \S+: could not record it: registry down$/),
      },
    ]);
  });
});

describe(`${ExecuteService.name} admission over Redis`, () => {
  const logs = captureLogs();
  let redis: Redis;
  let probe: Redis;
  let keys: RedisKeys;
  let registry: RedisQueryRegistry;
  let source: RedisResultSource;
  let queue: ProbingQueue;
  let service: ExecuteService;

  beforeEach(() => {
    // As the api's shared connection is made: auto-pipelined.
    redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1, enableAutoPipelining: true });
    probe = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
    keys = new RedisKeys(`admission-spec-${randomBytes(4).toString('hex')}`);
    registry = new RedisQueryRegistry(redis, keys, { seconds: 60, count: 1000 });
    source = new RedisResultSource(redis, keys, {
      connector: new RedisConnector({ mode: 'single', url: testRedisUrl }),
      silenceMs: 30_000,
      ttlSeconds: 60,
    });
    queue = new ProbingQueue(probe, keys);
    service = serviceOver(queue, registry, source, new RedisResultSink(redis, keys, 60));
  });

  afterEach(async () => {
    await source.close();
    const left = await probe.keys(`${keys.prefix}*`);
    if (left.length > 0) await probe.del(...left);
    await Promise.all([redis.quit(), probe.quit()]);
  });

  it('has the reader’s alive key in Redis before the job is queued', async () => {
    await expect(service.execute(body, user, {})).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    // A worker that took the job at once would find the key: nobody thinks the reader gone.
    expect(queue.aliveAtEnqueue).toBe(1);
    expect(logs.lines).toEqual([
      {
        level: 'error',
        context: 'ExecuteService',
        message: expect.stringMatching(/^query \S+: could not enqueue: queue down$/),
      },
    ]);
  });

  it('lets go of the Idempotency-Key of a request whose job could not be queued: a retry with the key claims it anew', async () => {
    const key = `key-${randomBytes(4).toString('hex')}`;
    const refused = service.execute(body, user, { idempotencyKey: key });
    await expect(refused).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(logs.lines.map((l) => l.message)).toEqual([
      expect.stringMatching(/could not enqueue: queue down$/),
    ]);
    // Another query claims the key as new: it stands for no query that never ran.
    const retry = { queryId: 'retry', fingerprint: 'f' };
    const limits = { ttlSeconds: 60, most: 10 };
    expect(await registry.claimKey({ owner: user.username, key }, retry, limits)).toEqual({
      outcome: 'claimed',
    });
  });

  it('leaves no slot, record or reader key behind a query refused at the cap', async () => {
    await registry.admit(user.username, 'held-1', CAP);
    await registry.admit(user.username, 'held-2', CAP);
    await expect(service.execute(body, user, {})).rejects.toMatchObject({ code: 'QUEUE_FULL' });
    expect(queue.aliveAtEnqueue).toBeUndefined();
    expect(await registry.list(100)).toEqual([]);
    // The index's trim (its lock) may have started with the query's record: not the query's.
    const left = (await probe.keys(`${keys.prefix}*`)).filter(
      (key) => key !== keys.queriesTrimLock,
    );
    expect(left).toEqual([keys.userSlots(user.username)]);
    expect(await probe.zrange(keys.userSlots(user.username), 0, -1)).toEqual(['held-1', 'held-2']);
  });
});
