import {
  DeleteObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { randomUUID } from 'node:crypto';
import { IncomingHttpHeaders, createServer, get as httpGet } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ResultManifest } from '@app/contracts';
import { S3RVER_CREDENTIALS } from '../support/s3.server';
import { freePort } from '../support/free-port';
import { e2eEnv, eventually, execute, login, request } from './support/client';
import { startExtraApi } from './support/extra-api';
import { ServiceProcess, startProcess, workerStarted } from './support/service';
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

/**
 * ~190 KiB of CSV: three segments or more, read 1,000 rows (~64 KiB) at a time. Left to the
 * server, a read after the first takes up to an entry (SLUICE_MAX_ENTRY_BYTES, 1 MiB) of rows at
 * once, and a segment is sealed between two reads: the whole result would fit in two.
 */
const STATEMENT =
  'select g, md5(g::text) as h, md5((g * 7)::text) as i from generate_series(1, 3000) g';
const FETCH_SIZE = 1000;

async function submitAsync(
  statement: string,
  accept = 'text/csv',
  as: string = token,
): Promise<string> {
  const res = await execute(
    { statement, wait_timeout: 0, fetch_size: FETCH_SIZE },
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

/**
 * The store as the test reaches it, beside the service: the keys of a query's segments, a delete,
 * and a put of one segment as a worker writes it. In the deployment's own place in the store (its
 * SLUICE_KEY_PREFIX under SLUICE_SPOOL_URL), or in `namespace`'s.
 */
function store(namespace = e2eEnv().keyPrefix): {
  keys(queryId: string): Promise<string[]>;
  drop(key: string): Promise<void>;
  put(queryId: string, name: string, bytes: Buffer): Promise<void>;
} {
  const env = e2eEnv();
  if (env.spool === 's3') {
    const prefix = `${env.s3!.prefix}${namespace}/`;
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
            Prefix: `${prefix}${queryId}/`,
          }),
        );
        return (page.Contents ?? []).map((o) => o.Key!).sort();
      },
      drop: async (key) => {
        await client.send(new DeleteObjectCommand({ Bucket: env.s3!.bucket, Key: key }));
      },
      put: async (queryId, name, bytes) => {
        await client.send(
          new PutObjectCommand({
            Bucket: env.s3!.bucket,
            Key: `${prefix}${queryId}/${name}`,
            Body: bytes,
          }),
        );
      },
    };
  }
  const dir = join(fileURLToPath(env.spoolEnv.SLUICE_SPOOL_URL), namespace);
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
    put: (queryId, name, bytes) => {
      mkdirSync(join(dir, queryId), { recursive: true });
      return Promise.resolve(writeFileSync(join(dir, queryId, name), bytes));
    },
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
    // Its length known from the manifest, the body is sent with it (no chunked framing).
    expect(whole.headers['content-length']).toBe(String(whole.bytes.length));
    expect(whole.headers['transfer-encoding']).toBeUndefined();
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
      expect(rest.headers['content-length']).toBe(String(whole.bytes.length - k));
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

/** One sample of /metrics: the value of `name` whose labels hold `labels` (0 when absent). */
async function metric(url: string, name: string, labels = ''): Promise<number> {
  const text = await fetch(url).then((res) => res.text());
  const line = new RegExp(`^${name}\\{[^}]*${labels}[^}]*\\} (\\S+)$`, 'm').exec(text);
  return Number(line?.[1] ?? 0);
}

describe('segments a worker left and never listed (it died)', () => {
  it('are deleted by the sweep once SLUICE_SPOOL_ORPHAN_SECONDS old', async () => {
    if (!spooled()) return;
    // A query id no record knows: what a worker that died mid-write leaves in the store.
    const queryId = randomUUID();
    await store().put(queryId, 'a1b2c3d4.000001', Buffer.alloc(1000, 1));
    expect((await store().keys(queryId)).length).toBe(1);
    // Beside it, what is not Sluice's (names it never writes), and another deployment's segment
    // in the same store (its own SLUICE_KEY_PREFIX): never touched.
    const others: [ReturnType<typeof store>, string, string][] = [
      [store(), randomUUID(), 'notes.txt'],
      [store(), 'reports', 'a1b2c3d4.000001'],
      [store(`${e2eEnv().keyPrefix}-other`), randomUUID(), 'a1b2c3d4.000001'],
    ];
    for (const [place, dir, name] of others) await place.put(dir, name, Buffer.alloc(10, 2));
    // SLUICE_SPOOL_SWEEP_SECONDS 2, SLUICE_SPOOL_ORPHAN_SECONDS 3.
    await eventually(
      async () => ((await store().keys(queryId)).length === 0 ? true : undefined),
      20_000,
    );
    // A whole sweep later, as old as the one deleted.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    for (const [place, dir, name] of others) {
      expect([dir, name, (await place.keys(dir)).length]).toEqual([dir, name, 1]);
      for (const key of await place.keys(dir)) await place.drop(key);
    }
  }, 40_000);
});

describe('/metrics of the spool', () => {
  it('shows the segments spooled and their bytes, as the sweep counted them, and the reads that failed', async () => {
    const metrics = `${e2eEnv().baseUrl}/metrics`;
    const queryId = await submitAsync(STATEMENT);
    await finished(queryId);
    if (!spooled()) {
      expect(await metric(metrics, 'sluice_spooled_objects')).toBe(0);
      return;
    }
    const { json } = await manifestOf(queryId);
    // SLUICE_SPOOL_SWEEP_SECONDS 2: the next sweep counts what the store holds, this result's too.
    await eventually(async () => {
      const objects = await metric(metrics, 'sluice_spooled_objects');
      const bytes = await metric(metrics, 'sluice_spooled_bytes');
      return objects >= json.segments.length && bytes >= json.size ? true : undefined;
    }, 15_000);
    const readErrors = await metric(metrics, 'sluice_spool_errors_total', 'operation="read"');
    await store().drop((await store().keys(queryId))[0]);
    expect((await fetchResult(queryId)).status).toBe(410);
    expect(await metric(metrics, 'sluice_spool_errors_total', 'operation="read"')).toBe(
      readErrors + 1,
    );
    await request(undefined, { method: 'DELETE', path: `/v1/queries/${queryId}`, token });
  }, 30_000);

  it('counts a kept result the spool refused to take where it was written (write), and fails its query saying so', async () => {
    const env = e2eEnv();
    const dir = mkdtempSync(join(tmpdir(), 'sluice-e2e-refusing-spool-'));
    // A process of its own (and its own worker in cluster mode) writing to a directory of ours.
    const spoolEnv = {
      SLUICE_SPOOL_URL: pathToFileURL(dir).href,
      SLUICE_SPOOL_SEGMENT_BYTES: String(64 * 1024),
      SLUICE_SPOOL_SEAL_MS: '200',
    };
    const keyPrefix = `${env.keyPrefix}-refusing`;
    const api = await startExtraApi({ ...spoolEnv, SLUICE_KEY_PREFIX: keyPrefix });
    let worker: ServiceProcess | undefined;
    let metrics = `${api.baseUrl}/metrics`;
    try {
      if (env.mode === 'cluster') {
        const port = await freePort();
        worker = startProcess('worker', {
          ...env.serviceEnv,
          ...env.redisEnv,
          ...spoolEnv,
          SLUICE_KEY_PREFIX: keyPrefix,
          SLUICE_WORKER_THREADS: '1',
          SLUICE_WORKER_METRICS_PORT: String(port),
        });
        await eventually(() => Promise.resolve(workerStarted(worker!) || undefined), 60_000);
        metrics = `http://127.0.0.1:${port}/metrics`;
      }
      expect(await metric(metrics, 'sluice_spool_errors_total', 'operation="write"')).toBe(0);
      // About 3 s of rows, a segment written every 200 ms or so.
      const slow = `select g, md5(g::text) as h, case when g % 100 = 0 then pg_sleep(0.1) end as s
                      from generate_series(1, 3000) g`;
      const res = await execute(
        { statement: slow, wait_timeout: 0, fetch_size: 100 },
        { token, baseUrl: api.baseUrl, headers: { accept: 'text/csv' } },
      );
      expect(res.status).toBe(202);
      const queryId = res.json.query_id as string;
      await eventually(() => {
        try {
          return Promise.resolve(
            readdirSync(join(dir, keyPrefix, queryId)).length > 0 ? true : undefined,
          );
        } catch {
          return Promise.resolve(undefined);
        }
      }, 20_000);
      // The directory gives way to a file: the next segment cannot be written.
      renameSync(dir, `${dir}.moved`);
      writeFileSync(dir, '');
      const info = await eventually(async () => {
        const r = await request(undefined, {
          method: 'GET',
          path: `/v1/queries/${queryId}`,
          token,
          baseUrl: api.baseUrl,
        });
        const json = r.json as { state: string; status: { reason: string; sql_state: string } };
        return ['succeeded', 'failed', 'cancelled'].includes(json.state) ? json : undefined;
      }, 20_000);
      expect(info.state).toBe('failed');
      expect(info.status.reason).toContain('(SLUICE_SPOOL_URL) could not be written');
      expect(await metric(metrics, 'sluice_spool_errors_total', 'operation="write"')).toBe(1);
    } finally {
      await worker?.stop();
      await api.stop();
      rmSync(dir, { recursive: true, force: true });
      rmSync(`${dir}.moved`, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('a user deleted', () => {
  it('takes the segments of the results they kept with them', async () => {
    const user = await createLoggedInUser(made, { prefix: 'e2e_spool_owner' });
    const queryId = await submitAsync(STATEMENT, 'text/csv', user.token);
    await finished(queryId, user.token);
    if (spooled()) expect((await store().keys(queryId)).length).toBeGreaterThanOrEqual(3);
    const deleted = await adminCall('DELETE', `/v1/users/${user.username}`);
    expect(deleted.status).toBe(200);
    // Deleted by this api, or by the other one that heard of the delete first (NOTIFY) and
    // forgot the user's queries before this one could: then moments after the answer (a
    // second at most here).
    if (spooled()) {
      const deadline = Date.now() + 1000;
      let left = await store().keys(queryId);
      while (left.length > 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        left = await store().keys(queryId);
      }
      expect(left).toEqual([]);
    }
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

  it('waits 2 s at most for a store that does not answer, and does not ask one that answered again for 5 s', async () => {
    // The kept queries it lets through run on the suite's workers, which must have a spool of
    // their own to keep them: the pass without one (kept results in Redis) has none.
    if (!spooled()) return;
    // A store that answers everything, but holds its bucket's check unanswered once told to.
    let silent = false;
    let checks = 0;
    const fake = createServer((req, res) => {
      if (req.method === 'HEAD') {
        checks++;
        if (silent) return;
      }
      res.writeHead(200).end();
    });
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
    const { port } = fake.address() as { port: number };
    const api = await startExtraApi({
      SLUICE_SPOOL_URL: 's3://answering/results',
      SLUICE_SPOOL_S3_ENDPOINT: `http://127.0.0.1:${port}`,
      AWS_ACCESS_KEY_ID: 'x',
      AWS_SECRET_ACCESS_KEY: 'x',
    });
    // A user of its own: the kept queries it leaves hold slots of theirs until they lapse.
    const user = await createLoggedInUser(made, { prefix: 'e2e_spool_check' });
    try {
      const kept = () =>
        execute(
          { statement: 'select 1 as n', wait_timeout: 0 },
          { token: user.token, baseUrl: api.baseUrl },
        );
      expect((await kept()).status).toBe(202);
      const answeredBy = Date.now();
      expect(checks).toBe(1);
      silent = true;
      expect((await kept()).status).toBe(202);
      expect(checks).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, answeredBy + 5_200 - Date.now()));
      const started = Date.now();
      const refused = await kept();
      const took = Date.now() - started;
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(checks).toBe(2);
      expect(took).toBeGreaterThanOrEqual(1_800);
      expect(took).toBeLessThan(4_500);
    } finally {
      await api.stop();
      fake.closeAllConnections();
      fake.close();
    }
  }, 120_000);

  it('answers a fetch 503 with Retry-After while the store cannot be read, never a body cut short', async () => {
    const queryId = await submitAsync(STATEMENT);
    await finished(queryId);
    if (e2eEnv().spool !== 's3') {
      expect((await fetchResult(queryId)).status).toBe(200);
      return;
    }
    // Another api of the same deployment, whose store is out of reach.
    const api = await startExtraApi({
      SLUICE_SPOOL_S3_ENDPOINT: `http://127.0.0.1:${await freePort()}`,
    });
    try {
      const asks: [string, Record<string, string>][] = [
        ['/result', {}],
        ['/result', { range: 'bytes=10-' }],
        ['/result/segments', {}],
      ];
      for (const [path, headers] of asks) {
        const res = await fetch(`${api.baseUrl}/v1/queries/${queryId}${path}`, {
          headers: { authorization: `Bearer ${token}`, ...headers },
        });
        const body = (await res.json()) as { status: { vendor_code: number } };
        expect([path, headers, res.status, body.status.vendor_code]).toEqual([
          path,
          headers,
          503,
          -109,
        ]);
        expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
      }
    } finally {
      await api.stop();
    }
  }, 120_000);
});
