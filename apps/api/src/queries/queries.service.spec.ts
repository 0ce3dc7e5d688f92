import { randomUUID } from 'node:crypto';
import { SluiceConfig } from '@app/config';
import { ExecuteJobData } from '@app/contracts';
import { QueryLifecycle } from '@app/execution';
import {
  InProcessJobQueue,
  InProcessQueryRegistry,
  QueryRecord,
  ResultSink,
  ResultSource,
} from '@app/transport';
import { AuthUser } from '../auth/auth-user';
import { QueriesService } from './queries.service';

const admin: AuthUser = { username: 'root', role: 'r', isAdmin: true, readOnly: false };
const owner: AuthUser = {
  username: 'mallory',
  userId: 'u1',
  role: 'r',
  isAdmin: false,
  readOnly: false,
};

function record(queryId: string, createdAt: number, state: QueryRecord['state']): QueryRecord {
  return {
    queryId,
    owner: owner.username,
    ownerId: owner.userId,
    state,
    format: 'json',
    statement: 'select 1',
    createdAt,
    rows: 0,
    bytes: 0,
  };
}

describe(QueriesService.name, () => {
  let queue: InProcessJobQueue;

  afterEach(() => queue?.close());

  it('lists every query under way, however many newer ones there are', async () => {
    const registry = new InProcessQueryRegistry({ seconds: 3600, count: 10_000 });
    queue = new InProcessJobQueue({ seconds: 60, count: 1000 });
    const service = new QueriesService(
      registry,
      queue,
      undefined as unknown as ResultSource,
      undefined as unknown as ResultSink,
      undefined as unknown as QueryLifecycle,
      { resultTtlSeconds: 60 } as SluiceConfig,
    );
    // A query that waits, then more finished ones after it than a list holds (500).
    const buried = randomUUID();
    await registry.create(record(buried, 1, 'queued'));
    await queue.enqueue({
      queryId: buried,
      username: owner.username,
      lane: 'interactive',
    } as ExecuteJobData);
    // Admitted: it holds a slot of its owner's.
    expect(await registry.admit(owner.username, buried, 10)).toBe(0);
    for (let i = 0; i < 510; i += 1) {
      await registry.create(record(randomUUID(), 2 + i, 'succeeded'));
    }
    for (const user of [admin, owner]) {
      const listed = await service.list(user);
      expect(listed.find((q) => q.query_id === buried)?.state).toBe('queued');
      // Newest first, the one under way last: the order of the list is kept.
      expect(listed.at(-1)?.query_id).toBe(buried);
    }
    // Another user does not see it.
    const other = { ...owner, username: 'someone', userId: 'u2' };
    expect((await service.list(other)).map((q) => q.query_id)).not.toContain(buried);
  });
});
