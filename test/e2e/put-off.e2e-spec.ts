import { RedisKeys } from '@app/transport';
import {
  createUser,
  e2eEnv,
  eventually,
  execute,
  request,
  usersDroppedAfterAll,
} from './support/client';
import { connectTestRedis } from './support/redis';

/**
 * Jobs a worker puts back in the queue while their user holds their share of its slots (Redis
 * only: standalone mode skips them instead, and has no such moment). For the few milliseconds a
 * worker holds such a job, DELETE cannot take it off the queue and only sets the query's cancel
 * key; the statement must then never run when its turn comes.
 */
const users = usersDroppedAfterAll();

/** sluice_user_share_put_offs_total of the interactive lane, every worker's together. */
async function putOffs(): Promise<number> {
  let total = 0;
  for (const url of e2eEnv().poolMetricsUrls) {
    const metrics = await fetch(url).then((res) => res.text());
    const count = /^sluice_user_share_put_offs_total\{[^}]*lane="interactive"[^}]*\} (\d+)/m.exec(
      metrics,
    );
    total += Number(count?.[1] ?? 0);
  }
  return total;
}

async function infoOf(queryId: string, token: string): Promise<Record<string, unknown>> {
  const res = await request(undefined, { method: 'GET', path: `/v1/queries/${queryId}`, token });
  expect(res.status).toBe(200);
  return res.json as Record<string, unknown>;
}

it('never runs a put-off query whose cancel came while a worker held it', async () => {
  const hog = await createUser('e2e_putoff');
  users.push(hog.username);
  const { userSlots } = e2eEnv();
  // The count is the worker's since it started: earlier specs' put-offs are in it.
  const putOffsBefore = await putOffs();
  const sleepers = Array.from({ length: userSlots }, () =>
    execute({ statement: 'select pg_sleep(20)', timeout: 20_000 }, { token: hog.token }),
  );
  await eventually(async () => {
    const list = await request(undefined, { method: 'GET', path: '/v1/queries', token: hog.token });
    const running = (list.json as { state: string }[]).filter((q) => q.state === 'running');
    return running.length === userSlots ? true : undefined;
  });
  const res = await execute(
    { statement: 'select 1 as never', wait_timeout: 0 },
    { token: hog.token },
  );
  expect(res.status).toBe(202);
  const queryId = res.json.query_id as string;
  // What DELETE does when it finds the job held: the cancel key alone (set here directly, since
  // the moment a worker holds a put-off job is too short to aim a DELETE at). The job may also be
  // held waiting for one of its user's slots when the cancel comes, and be handed the slot:
  // either way it must not run.
  const redis = connectTestRedis();
  try {
    await redis.set(new RedisKeys(e2eEnv().keyPrefix).cancel(queryId), '1', 'EX', 60);
  } finally {
    redis.disconnect();
  }
  expect(await infoOf(queryId, hog.token)).toMatchObject({ state: 'queued' });
  // Put off, and counted where an operator looks (a worker's /metrics).
  expect(await eventually(async () => ((await putOffs()) > putOffsBefore ? true : undefined))).toBe(
    true,
  );
  // The sleepers end: one of the user's slots frees, and the put-off job is taken at once.
  const list = await request(undefined, { method: 'GET', path: '/v1/queries', token: hog.token });
  for (const q of list.json as { query_id: string; state: string }[]) {
    if (q.state !== 'running') continue;
    await request(undefined, {
      method: 'DELETE',
      path: `/v1/queries/${q.query_id}`,
      token: hog.token,
    });
  }
  await Promise.all(sleepers);
  const ended = await eventually(async () => {
    const info = await infoOf(queryId, hog.token);
    return info.state === 'queued' ? undefined : info;
  });
  expect(ended).toMatchObject({
    state: 'cancelled',
    started_at: null,
    status: { vendor_code: -900 },
  });
});
