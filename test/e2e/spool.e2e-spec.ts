import { DeleteObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { readdirSync, rmSync } from 'node:fs';
import { IncomingHttpHeaders, get as httpGet } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ResultManifest } from '@app/contracts';
import { S3RVER_CREDENTIALS } from '../support/s3.server';
import { freePort } from '../support/free-port';
import { e2eEnv, eventually, execute, login, request } from './support/client';
import { startExtraApi } from './support/extra-api';
import { adminCall, createLoggedInUser, usersAndRolesDroppedAfterAll } from './support/users';

/**
 * Kept results in the spool (SLUICE_E2E_SPOOL: a directory, or s3rver through the AWS SDK): the
 * body is in segments of 64 KiB in the suite, listed by the manifest, fetched through the api
 * with Range mapped onto them, or straight from the store by presigned URL (S3). Without a spool
 * (cluster's default), the manifest is refused and kept results stay in Redis.
 */
let token: string;
const made = usersAndRolesDroppedAfterAll();

beforeAll(async () => {
  token = await login();
});

const spooled = () => e2eEnv().spool !== 'redis';

/** ~190 KiB of CSV: three segments or more. */
const STATEMENT =
  'select g, md5(g::text) as h, md5((g * 7)::text) as i from generate_series(1, 3000) g';

async function submitAsync(
  statement: string,
  accept = 'text/csv',
  as: string = token,
): Promise<string> {
  const res = await execute(
    { statement, wait_timeout: 0 },
    { token: as, headers: { accept, 'accept-encoding': 'identity' } },
  );
  expect(res.status).toBe(202);
  return res.json.query_id as string;
}

async function finished(queryId: string, as: string = token): Promise<void> {
  await eventually(async () => {
    const res = await request(undefined, {
      method: 'GET',
      path: `/v1/queries/${queryId}`,
      token: as,
    });
    const state = (res.json as { state?: string }).state;
    return state && ['succeeded', 'failed', 'cancelled'].includes(state) ? state : undefined;
  }, 20_000);
}

function fetchResult(
  queryId: string,
  headers: Record<string, string> = {},
  suffix = '',
): Promise<{ status: number; headers: IncomingHttpHeaders; bytes: Buffer }> {
  const url = new URL(`${e2eEnv().baseUrl}/v1/queries/${queryId}/result${suffix}`);
  return new Promise((resolve, reject) => {
    httpGet(url, { headers: { authorization: `Bearer ${token}`, ...headers } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (part: Buffer) => parts.push(part));
      res.on('end', () =>
        resolve({ status: res.statusCode!, headers: res.headers, bytes: Buffer.concat(parts) }),
      );
      res.on('error', reject);
    }).on('error', reject);
  });
}

/** The store as the test reaches it, beside the service: the keys of a query's segments, and a delete. */
function store(): { keys(queryId: string): Promise<string[]>; drop(key: string): Promise<void> } {
  const env = e2eEnv();
  if (env.spool === 's3') {
    const client = new S3Client({
      endpoint: env.s3!.endpoint,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: S3RVER_CREDENTIALS,
      requestChecksumCalculation: 'WHEN_REQUIRED',
    });
    return {
      keys: async (queryId) => {
        const page = await client.send(
          new ListObjectsV2Command({
            Bucket: env.s3!.bucket,
            Prefix: `${env.s3!.prefix}${queryId}/`,
          }),
        );
        return (page.Contents ?? []).map((o) => o.Key!).sort();
      },
      drop: async (key) => {
        await client.send(new DeleteObjectCommand({ Bucket: env.s3!.bucket, Key: key }));
      },
    };
  }
  const dir = fileURLToPath(env.spoolEnv.SLUICE_SPOOL_URL);
  return {
    keys: (queryId) => {
      try {
        return Promise.resolve(
          readdirSync(join(dir, queryId))
            .map((name) => join(dir, queryId, name))
            .sort(),
        );
      } catch {
        return Promise.resolve([]);
      }
    },
    drop: (key) => Promise.resolve(rmSync(key)),
  };
}

async function manifestOf(queryId: string): Promise<{ status: number; json: ResultManifest }> {
  const res = await request(undefined, {
    method: 'GET',
    path: `/v1/queries/${queryId}/result/segments`,
    token,
  });
  return { status: res.status, json: res.json as unknown as ResultManifest };
}

describe('GET /v1/queries/{id}/result/segments', () => {
  it("lists a spooled result's segments end to end: their bytes are the body …/result sends; on S3, by presigned URLs too", async () => {
    const queryId = await submitAsync(STATEMENT);
    await finished(queryId);
    const manifest = await manifestOf(queryId);
    if (!spooled()) {
      expect(manifest.status).toBe(404);
      expect(JSON.stringify(manifest.json)).toContain('SLUICE_SPOOL_URL');
      return;
    }
    expect(manifest.status).toBe(200);
    const whole = await fetchResult(queryId);
    expect(whole.status).toBe(200);
    const { segments } = manifest.json;
    expect(manifest.json).toMatchObject({
      query_id: queryId,
      complete: true,
      size: whole.bytes.length,
    });
    expect(manifest.json.content_type).toContain('text/csv');
    expect(segments.length).toBeGreaterThanOrEqual(3);
    let offset = 0;
    for (const segment of segments) {
      expect(segment.offset).toBe(offset);
      offset += segment.size;
    }
    expect(offset).toBe(whole.bytes.length);
    expect((await store().keys(queryId)).length).toBe(segments.length);
    if (e2eEnv().spool === 's3') {
      expect(Date.parse(manifest.json.expires_at!)).toBeGreaterThan(Date.now());
      const parts = await Promise.all(
        segments.map(async (s) => Buffer.from(await (await fetch(s.url!)).arrayBuffer())),
      );
      expect(Buffer.concat(parts).equals(whole.bytes)).toBe(true);
    } else {
      expect(segments.every((s) => s.url === undefined)).toBe(true);
    }
  });
});

describe('a spooled kept result', () => {
  it('answers Range from inside a later segment with exactly the rest of the body (206)', async () => {
    const queryId = await submitAsync(STATEMENT, 'application/stream+json');
    await finished(queryId);
    const whole = await fetchResult(queryId);
    const { json } = await manifestOf(queryId);
    const starts = spooled()
      ? [json.segments[1].offset + 17, json.segments.at(-1)!.offset, json.segments[1].offset]
      : [whole.bytes.length - 100];
    for (const k of starts) {
      const rest = await fetchResult(queryId, { range: `bytes=${k}-` });
      expect(rest.status).toBe(206);
      expect(rest.headers['content-range']).toBe(
        `bytes ${k}-${whole.bytes.length - 1}/${whole.bytes.length}`,
      );
      expect(rest.bytes.equals(whole.bytes.subarray(k))).toBe(true);
    }
  });

  it('whose segment is lost from the store answers 410 with the reason, never a body cut short as if whole', async () => {
    const queryId = await submitAsync(STATEMENT);
    await finished(queryId);
    if (!spooled()) {
      expect((await fetchResult(queryId)).status).toBe(200);
      return;
    }
    const keys = await store().keys(queryId);
    expect(keys.length).toBeGreaterThanOrEqual(3);
    await store().drop(keys[1]);
    for (const headers of [{}, { range: 'bytes=10-' }] as Record<string, string>[]) {
      const res = await fetchResult(queryId, headers);
      expect(res.status).toBe(410);
      const body = JSON.parse(res.bytes.toString()) as {
        status: { reason: string; vendor_code: number };
      };
      expect(body.status.vendor_code).toBe(-113);
      expect(body.status.reason).toContain('missing from the store');
    }
    expect((await manifestOf(queryId)).status).toBe(410);
  });

  it('has its segments deleted by DELETE, and by the sweep once its TTL passed', async () => {
    const dropped = await submitAsync(STATEMENT);
    const expiring = await submitAsync(STATEMENT);
    await finished(dropped);
    await finished(expiring);
    if (!spooled()) {
      expect((await fetchResult(expiring)).status).toBe(200);
      return;
    }
    expect((await store().keys(dropped)).length).toBeGreaterThan(0);
    const deleted = await request(undefined, {
      method: 'DELETE',
      path: `/v1/queries/${dropped}`,
      token,
    });
    expect(deleted.status).toBe(200);
    expect(await store().keys(dropped)).toEqual([]);
    expect((await store().keys(expiring)).length).toBeGreaterThan(0);
    // SLUICE_RESULT_TTL_SECONDS 8, SLUICE_SPOOL_SWEEP_SECONDS 2, SLUICE_SPOOL_ORPHAN_SECONDS 3.
    await eventually(
      async () => ((await store().keys(expiring)).length === 0 ? true : undefined),
      25_000,
    );
    expect((await fetchResult(expiring)).status).toBe(410);
  }, 40_000);
});

describe('a user deleted', () => {
  it('takes the segments of the results they kept with them', async () => {
    const user = await createLoggedInUser(made, { prefix: 'e2e_spool_owner' });
    const queryId = await submitAsync(STATEMENT, 'text/csv', user.token);
    await finished(queryId, user.token);
    if (spooled()) expect((await store().keys(queryId)).length).toBeGreaterThanOrEqual(3);
    const deleted = await adminCall('DELETE', `/v1/users/${user.username}`);
    expect(deleted.status).toBe(200);
    if (spooled()) expect(await store().keys(queryId)).toEqual([]);
    const admin = await request(undefined, {
      method: 'GET',
      path: `/v1/queries/${queryId}`,
      token,
    });
    expect(admin.status).toBe(404);
  });
});

describe('a spool out of reach', () => {
  it('refuses a kept query at once with 503 and Retry-After; a synchronous one runs as ever', async () => {
    const api = await startExtraApi({
      SLUICE_SPOOL_URL: 's3://nowhere/results',
      SLUICE_SPOOL_S3_ENDPOINT: `http://127.0.0.1:${await freePort()}`,
      AWS_ACCESS_KEY_ID: 'x',
      AWS_SECRET_ACCESS_KEY: 'x',
    });
    try {
      const { baseUrl } = api;
      const started = Date.now();
      const kept = await execute(
        { statement: 'select 1 as n', wait_timeout: 0 },
        { token, baseUrl },
      );
      expect(kept.status).toBe(503);
      expect(kept.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(JSON.stringify(kept.json)).toContain('SLUICE_SPOOL_URL');
      expect(Date.now() - started).toBeLessThan(5000);
      const sync = await execute({ statement: 'select 1 as n' }, { token, baseUrl });
      expect(sync.status).toBe(200);
    } finally {
      await api.stop();
    }
  }, 120_000);
});
