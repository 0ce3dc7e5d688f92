import { randomUUID } from 'node:crypto';
import { HttpResult, e2eEnv, execute, login, request } from './support/client';
import { deployment, firstAnswer, startWorker } from './support/lanes';

/**
 * The registry keeps the records of at most SLUICE_QUERY_RETENTION_COUNT finished queries,
 * besides open queries and kept results: an older one is no longer known (404). In a deployment
 * of its own, so that its small count never touches the suite's other queries.
 */
const stops: (() => Promise<unknown>)[] = [];

afterAll(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

jest.setTimeout(90_000);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('SLUICE_QUERY_RETENTION_COUNT', () => {
  it('forgets finished queries past the count; the newest and a kept result stay', async () => {
    const { api, prefix } = await deployment({ SLUICE_QUERY_RETENTION_COUNT: '3' }, stops);
    if (e2eEnv().mode === 'cluster') {
      const worker = startWorker(prefix, {});
      stops.push(() => worker.stop());
    }
    const token = await login();
    const { baseUrl } = api;
    const run = async (headers: Record<string, string> = {}): Promise<string> => {
      const res = await execute({ statement: 'select 1 as one' }, { token, baseUrl, headers });
      expect(res.status).toBe(200);
      return (res.json as { query_id: string }).query_id;
    };
    const known = (queryId: string, suffix = ''): Promise<HttpResult> =>
      request(undefined, {
        method: 'GET',
        path: `/v1/queries/${queryId}${suffix}`,
        token,
        baseUrl,
      });

    await firstAnswer(baseUrl, token);
    const kept = await run({ 'idempotency-key': randomUUID() });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await run());
    // Cluster: the index is trimmed as queries are created, at most every 10 s.
    let newest = ids[4];
    let oldest = await known(ids[0]);
    for (let tries = 0; oldest.status !== 404 && tries < 40; tries++) {
      await sleep(500);
      newest = await run();
      oldest = await known(ids[0]);
    }
    expect(oldest.status).toBe(404);
    expect(oldest.json).toMatchObject({ status: { sql_state: '42704', vendor_code: -104 } });
    expect((await known(kept)).status).toBe(200);
    expect((await known(kept, '/result')).status).toBe(200);
    expect((await known(newest)).status).toBe(200);
  });
});
