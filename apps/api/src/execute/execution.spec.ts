import { once } from 'node:events';
import { ExecuteJobData, ResultRecord, okStatus, statusOf } from '@app/contracts';
import { QueryLifecycle } from '@app/execution';
import {
  InProcessQueryRegistry,
  InProcessResultChannel,
  ResultReader,
  ResultSource,
} from '@app/transport';
import { Execution } from './execution';
import { executionBody } from './execution.stream';

/**
 * An execution's one way out, whichever path takes it: a failure before the body, a body that
 * ends, or a response that closes first. Over standalone mode's channel and registry.
 */
const quiet = () => Promise.resolve(undefined);
const OWNER = 'owner';

let channel: InProcessResultChannel;
let registry: InProcessQueryRegistry;
let cancels: number;
/** The channel, counting the cancels its readers send. */
let source: ResultSource;
let seq = 0;

beforeEach(() => {
  channel = new InProcessResultChannel(5000);
  registry = new InProcessQueryRegistry({ seconds: 60, count: 1000 });
  cancels = 0;
  source = {
    open: (queryId, hooks): ResultReader => {
      const reader = channel.open(queryId, hooks);
      return {
        next: () => reader.next(),
        cancel: () => {
          cancels += 1;
          return reader.cancel();
        },
        close: () => reader.close(),
      };
    },
    openKept: (queryId, hooks) => channel.openKept(queryId, hooks),
    keptRecords: (queryId) => channel.keptRecords(queryId),
    kept: (queryId) => channel.kept(queryId),
    dropKept: (queryId) => channel.dropKept(queryId),
    keptBytes: () => channel.keptBytes(),
    cancel: (queryId) => channel.cancel(queryId),
    close: () => channel.close(),
  };
});

afterEach(() => channel.close());

/** A query listed in the registry, holding one of its owner's slots, with its reader open. */
async function started(): Promise<Execution> {
  const queryId = `q${++seq}`;
  await registry.admit(OWNER, queryId, 10);
  await registry.create({
    queryId,
    owner: OWNER,
    state: 'queued',
    format: 'ndjson',
    statement: 'select 1',
    createdAt: Date.now(),
    rows: 0,
    bytes: 0,
  });
  const job = { queryId, username: OWNER } as ExecuteJobData;
  return Execution.open(job, {
    results: source,
    lifecycle: new QueryLifecycle(registry),
    onSilence: quiet,
  });
}

/** Whether the owner's slot for the query is free again (the registry admits it anew). */
async function slotFree(queryId: string): Promise<boolean> {
  const before = await registry.admit(OWNER, queryId, 10);
  await registry.release(OWNER, queryId);
  return before === 0;
}

describe(Execution.name, () => {
  it('fail(status) records the status, frees the slot and the reader, and cancels nothing', async () => {
    const execution = await started();
    const status = statusOf('UNAVAILABLE', 'the query queue is not reachable');
    await execution.fail(status);
    expect(await registry.get(execution.queryId)).toMatchObject({ state: 'failed', status });
    expect(await slotFree(execution.queryId)).toBe(true);
    expect(channel.stats.open).toBe(0);
    // The response's close comes later whatever happened: it changes nothing.
    await execution.close();
    expect(cancels).toBe(0);
    expect(await registry.get(execution.queryId)).toMatchObject({ state: 'failed', status });
  });

  it('close() on a query that did not end cancels it once, as the client went away', async () => {
    const execution = await started();
    const closing = execution.close();
    expect(execution.close()).toBe(closing);
    await closing;
    expect(cancels).toBe(1);
    expect(await registry.get(execution.queryId)).toMatchObject({
      state: 'cancelled',
      status: { reason: 'client went away' },
    });
    expect(await slotFree(execution.queryId)).toBe(true);
    expect(channel.stats.open).toBe(0);
    await execution.fail(statusOf('INTERNAL'));
    expect(await registry.get(execution.queryId)).toMatchObject({ state: 'cancelled' });
  });

  it('its body sends what was read ahead and what follows, records the end and closes it', async () => {
    const execution = await started();
    const head: ResultRecord = { kind: 'head', columns: [], bytes: Buffer.from('h\n') };
    await channel.end(execution.queryId, { kind: 'data', rows: 2, bytes: Buffer.from('d\n') });
    await channel.end(execution.queryId, {
      kind: 'end',
      status: okStatus(),
      bytes: Buffer.from('e\n'),
    });
    const body = executionBody(execution, [head], () => null);
    let received = '';
    body.on('data', (chunk: Buffer) => (received += chunk.toString()));
    await once(body, 'end');
    await execution.close();
    expect(received).toBe('h\nd\ne\n');
    expect(cancels).toBe(0);
    expect(await registry.get(execution.queryId)).toMatchObject({ state: 'succeeded', rows: 2 });
    expect(await slotFree(execution.queryId)).toBe(true);
    expect(channel.stats.open).toBe(0);
  });
});
