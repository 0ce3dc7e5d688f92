import { ClientRequest, get as httpGet } from 'node:http';
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
 * Fetches of a kept result (GET /v1/queries/{id}/result) by a hostile user: each fetch waiting
 * for a query's first bytes holds a reader (in cluster mode a blocking Redis connection of its
 * own), so a fetch whose client left must let it go at once, and one user may hold only
 * SLUICE_MAX_ACTIVE_PER_USER (6 in the suite) of them at a time in one api process.
 */
const users = usersDroppedAfterAll();
let token: string;
const CAP = 6;

beforeAll(async () => {
  const user = await createUser('kept_fetch');
  users.push(user.username);
  token = user.token;
});

/** A fetch of the result on the first api, left open: its status once headers come. */
function openFetch(queryId: string): { req: ClientRequest; status: Promise<number> } {
  const url = new URL(`${e2eEnv().baseUrl}/v1/queries/${queryId}/result`);
  let req!: ClientRequest;
  const status = new Promise<number>((resolve) => {
    req = httpGet(url, { headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(-1));
  });
  return { req, status };
}

/** Blocking connections of kept-result readers, on every api of the suite. */
async function keptReaders(): Promise<number> {
  const redis = connectTestRedis();
  try {
    const list = (await redis.call('CLIENT', 'LIST')) as string;
    return list
      .split('\n')
      .filter((line) => line.includes(`name=${e2eEnv().keyPrefix}:reader:kept`)).length;
  } finally {
    redis.disconnect();
  }
}

async function longKeptQuery(): Promise<string> {
  const res = await execute(
    { statement: 'select pg_sleep(25), 1 as n', wait_timeout: 0 },
    { token },
  );
  expect(res.status).toBe(202);
  return res.json.query_id as string;
}

async function cancel(queryId: string): Promise<void> {
  await request(undefined, { method: 'DELETE', path: `/v1/queries/${queryId}`, token });
}

it('lets a waiting fetch go when its client leaves, not when the query first answers', async () => {
  const queryId = await longKeptQuery();
  try {
    const fetches = Array.from({ length: CAP }, () => openFetch(queryId));
    if (e2eEnv().mode === 'cluster') {
      await eventually(async () => ((await keptReaders()) >= CAP ? true : undefined), 5_000);
    }
    for (const { req } of fetches) req.destroy();
    if (e2eEnv().mode === 'cluster') {
      // The query runs 25 s: its readers must not wait for it.
      await eventually(async () => ((await keptReaders()) === 0 ? true : undefined), 5_000);
    }
    // Given back to the cap too: as many again may wait, and one more is refused.
    const again = Array.from({ length: CAP }, () => openFetch(queryId));
    await new Promise((resolve) => setTimeout(resolve, 500));
    const extra = openFetch(queryId);
    expect(await extra.status).toBe(429);
    for (const { req } of again) req.destroy();
  } finally {
    await cancel(queryId);
  }
}, 30_000);

it('refuses a fetch past the cap with 429 in the envelope, and frees it when a fetch ends', async () => {
  const queryId = await longKeptQuery();
  try {
    const fetches = Array.from({ length: CAP }, () => openFetch(queryId));
    await new Promise((resolve) => setTimeout(resolve, 500));
    const res = await request(undefined, {
      baseUrl: e2eEnv().baseUrl,
      method: 'GET',
      path: `/v1/queries/${queryId}/result`,
      token,
    });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.json).toMatchObject({ status: { vendor_code: -108 } });
    fetches[0].req.destroy();
    const freed = await eventually(async () => {
      const next = openFetch(queryId);
      const status = await Promise.race([
        next.status,
        new Promise<number>((resolve) => setTimeout(() => resolve(0), 300)),
      ]);
      next.req.destroy();
      return status === 0 ? true : undefined;
    }, 5_000);
    expect(freed).toBe(true);
    for (const { req } of fetches) req.destroy();
  } finally {
    await cancel(queryId);
  }
}, 30_000);
