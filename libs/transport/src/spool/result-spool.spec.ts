import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { freePort } from '@test/support/free-port';
import { S3RVER_CREDENTIALS, TestS3Server, startS3Server } from '@test/support/s3.server';
import { FileResultSpool } from './file-result.spool';
import {
  ResultSpool,
  SpoolMissingError,
  SpoolUnavailableError,
  queryOfSegment,
  removeQuery,
} from './result.spool';
import { openSpool } from './spool.factory';
import { STORE_SILENCE_MS, S3ResultSpool } from './s3-result.spool';

/**
 * The ResultSpool port, the same cases over both adapters: a directory, and an S3-compatible
 * server (s3rver, started here) through the AWS SDK.
 */
let s3: TestS3Server;
let dir: string;

beforeAll(async () => {
  s3 = await startS3Server();
  dir = mkdtempSync(join(tmpdir(), 'spool-spec-'));
});

afterAll(async () => {
  await s3.stop();
  rmSync(dir, { recursive: true, force: true });
});

function s3Spool(endpoint = s3.endpoint, silenceMs?: number): S3ResultSpool {
  return new S3ResultSpool({
    bucket: s3.bucket,
    prefix: `spec-${randomBytes(3).toString('hex')}/`,
    endpoint,
    silenceMs,
    client: { credentials: S3RVER_CREDENTIALS, maxAttempts: 1 },
  });
}

async function text(stream: Readable): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part as Buffer);
  return Buffer.concat(parts).toString();
}

async function keys(spool: ResultSpool, prefix?: string): Promise<string[]> {
  const found: string[] = [];
  for await (const entry of spool.list(prefix)) found.push(entry.key);
  return found.sort();
}

const adapters: [string, () => ResultSpool][] = [
  ['file', () => new FileResultSpool(join(dir, randomBytes(3).toString('hex')))],
  ['s3', () => s3Spool()],
];

describe.each(adapters)('ResultSpool (%s)', (kind, make) => {
  let spool: ResultSpool;
  beforeEach(() => {
    spool = make();
  });
  afterEach(() => spool.close());

  it('gives back a segment as put, whole and from an offset', async () => {
    await spool.put('q1/a.000001', [Buffer.from('hello '), Buffer.from('world')]);
    expect(await text(await spool.read('q1/a.000001'))).toBe('hello world');
    expect(await text(await spool.read('q1/a.000001', 6))).toBe('world');
  });

  it('throws SpoolMissingError for a segment that is not there', async () => {
    await expect(spool.read('q2/a.000001')).rejects.toBeInstanceOf(SpoolMissingError);
  });

  it("lists one query's segments apart from another's, with their sizes, and removes them", async () => {
    const before = Date.now() - 2000;
    await spool.put('q3/a.000001', [Buffer.alloc(10)]);
    await spool.put('q3/a.000002', [Buffer.alloc(20)]);
    await spool.put('q4/b.000001', [Buffer.alloc(5)]);
    const mine: { key: string; size: number }[] = [];
    for await (const entry of spool.list('q3/')) {
      expect(entry.modifiedAt).toBeGreaterThan(before);
      mine.push({ key: entry.key, size: entry.size });
    }
    expect(mine.sort((a, b) => a.key.localeCompare(b.key))).toEqual([
      { key: 'q3/a.000001', size: 10 },
      { key: 'q3/a.000002', size: 20 },
    ]);
    expect(await keys(spool)).toEqual(['q3/a.000001', 'q3/a.000002', 'q4/b.000001']);
    expect(await removeQuery(spool, 'q3')).toBe(2);
    expect(await keys(spool)).toEqual(['q4/b.000001']);
    // Removing what is not there is no error.
    await spool.remove(['q3/a.000001', 'q9/x.000001']);
    await expect(spool.read('q3/a.000002')).rejects.toBeInstanceOf(SpoolMissingError);
  });

  it('answers check() while the store is there', async () => {
    await expect(spool.check(2000)).resolves.toBeUndefined();
  });

  if (kind === 's3') {
    it('presigns a URL that reads the segment with no other credential', async () => {
      await spool.put('q5/a.000001', [Buffer.from('signed bytes')]);
      const url = await spool.presign('q5/a.000001', 60);
      expect(url).toMatch(/X-Amz-Signature=/);
      const res = await fetch(url!);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('signed bytes');
      expect(new URL(url!).searchParams.get('X-Amz-Expires')).toBe('60');
    });
  } else {
    it('has no presigned URL, and refuses a key that climbs out of its directory', async () => {
      await spool.put('q5/a.000001', [Buffer.from('x')]);
      expect(await spool.presign('q5/a.000001', 60)).toBeUndefined();
      await expect(spool.put('../x/a.000001', [Buffer.from('x')])).rejects.toThrow();
      await expect(spool.read('q5/..')).rejects.toThrow('not a segment key');
    });
  }
});

describe('ResultSpool, its store unreachable', () => {
  it('s3: check() and put() fail with SpoolUnavailableError, not a hang', async () => {
    const spool = s3Spool(`http://127.0.0.1:${await freePort()}`);
    try {
      const started = Date.now();
      await expect(spool.check(2000)).rejects.toBeInstanceOf(SpoolUnavailableError);
      await expect(spool.put('q/a.000001', [Buffer.from('x')])).rejects.toBeInstanceOf(
        SpoolUnavailableError,
      );
      // A listing too (what a fetch checks a finished result's segments with): 503, not 500.
      await expect(keys(spool)).rejects.toBeInstanceOf(SpoolUnavailableError);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      spool.close();
    }
  });

  /**
   * A store on loopback that takes every connection and request and never finishes an answer:
   * `answer` says how far it goes (nothing at all, or a GET's head and half its body).
   */
  async function silentStore(answer: 'nothing' | 'half a body') {
    const server = createServer((req, res) => {
      if (answer === 'half a body' && req.method === 'GET') {
        res.writeHead(200, { 'content-length': '1000', 'content-type': 'text/csv' });
        res.write('x'.repeat(500));
      }
      // Else nothing: the request is read and never answered.
      req.resume();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return {
      endpoint: `http://127.0.0.1:${port}`,
      close: () => {
        server.closeAllConnections();
        return new Promise((resolve) => server.close(resolve));
      },
    };
  }

  it('s3: a write to a store that never answers fails with SpoolUnavailableError once silenceMs passes', async () => {
    const store = await silentStore('nothing');
    const spool = s3Spool(store.endpoint, 300);
    try {
      const started = Date.now();
      const err = await spool.put('q/a.000001', [Buffer.from('x')]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SpoolUnavailableError);
      expect(String((err as Error).cause)).toContain('timed out after 300 ms of inactivity');
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      spool.close();
      await store.close();
    }
  });

  it('s3: a read whose body stops coming fails, never a stream that waits for ever', async () => {
    const store = await silentStore('half a body');
    const spool = s3Spool(store.endpoint, 300);
    try {
      const body = await spool.read('q/a.000001');
      await expect(text(body)).rejects.toThrow('timed out after 300 ms of inactivity');
    } finally {
      spool.close();
      await store.close();
    }
  });

  it('s3: gives the SDK 30 s of silence and 5 s to connect unless told otherwise (its own default is no limit)', async () => {
    const spool = s3Spool();
    try {
      const handler = (spool as unknown as { client: S3Client }).client.config
        .requestHandler as unknown as {
        configProvider: Promise<{ socketTimeout?: number; connectionTimeout?: number }>;
      };
      const config = await handler.configProvider;
      expect(config).toMatchObject({ socketTimeout: 30_000, connectionTimeout: 5_000 });
      expect(STORE_SILENCE_MS).toBe(config.socketTimeout);
    } finally {
      spool.close();
    }
  });

  it('file: check() and put() fail with SpoolUnavailableError where the directory cannot be', async () => {
    const blocker = join(dir, 'a-file');
    writeFileSync(blocker, 'not a directory');
    const spool: ResultSpool = new FileResultSpool(join(blocker, 'spool'));
    await expect(spool.check(2000)).rejects.toBeInstanceOf(SpoolUnavailableError);
    await expect(spool.put('q/a.000001', [Buffer.from('x')])).rejects.toBeInstanceOf(
      SpoolUnavailableError,
    );
  });
});

describe(queryOfSegment.name, () => {
  const id = 'f47ac10b-58cc-4372-a567-0e02b2c3d479';

  it('names the query of a key Sluice writes, the temporary name of a file spool included', () => {
    expect(queryOfSegment(`${id}/a1b2c3d4.000001`)).toBe(id);
    expect(queryOfSegment(`${id}/a1b2c3d4.000012.tmp-0badcafe`)).toBe(id);
  });

  it('names none for a key Sluice never writes: such objects are not its to delete', () => {
    for (const key of [
      `${id}/notes.txt`,
      `reports/a1b2c3d4.000001`,
      `${id}`,
      `${id}/a1b2c3d4.000001/more`,
      `x/${id}/a1b2c3d4.000001`,
      'readme',
    ]) {
      expect([key, queryOfSegment(key)]).toEqual([key, undefined]);
    }
  });
});

describe(openSpool.name, () => {
  const segment = 'f47ac10b-58cc-4372-a567-0e02b2c3d479/a1b2c3d4.000001';

  it.each(['file', 's3'])(
    '%s: keeps each deployment (SLUICE_KEY_PREFIX) in a place of its own in the same store',
    async (kind) => {
      const url =
        kind === 'file'
          ? `file://${join(dir, `shared-${randomBytes(3).toString('hex')}`)}`
          : `s3://${s3.bucket}/shared-${randomBytes(3).toString('hex')}`;
      // openSpool's S3 client takes the SDK's credential chain, as the service's does.
      const saved = {
        id: process.env.AWS_ACCESS_KEY_ID,
        secret: process.env.AWS_SECRET_ACCESS_KEY,
      };
      process.env.AWS_ACCESS_KEY_ID = S3RVER_CREDENTIALS.accessKeyId;
      process.env.AWS_SECRET_ACCESS_KEY = S3RVER_CREDENTIALS.secretAccessKey;
      const [one, other] = ['one', 'other'].map((namespace) =>
        openSpool({ url, namespace, s3Endpoint: s3.endpoint, s3Region: 'us-east-1' }),
      );
      try {
        await one.put(segment, [Buffer.from('one')]);
        await other.put(segment, [Buffer.from('other')]);
        expect(await keys(one)).toEqual([segment]);
        expect(await text(await other.read(segment))).toBe('other');
        await removeQuery(one, segment.split('/')[0]);
        expect(await keys(one)).toEqual([]);
        expect(await keys(other)).toEqual([segment]);
      } finally {
        one.close();
        other.close();
        process.env.AWS_ACCESS_KEY_ID = saved.id;
        process.env.AWS_SECRET_ACCESS_KEY = saved.secret;
        if (saved.id === undefined) delete process.env.AWS_ACCESS_KEY_ID;
        if (saved.secret === undefined) delete process.env.AWS_SECRET_ACCESS_KEY;
      }
    },
  );
});

describe(FileResultSpool.name, () => {
  let root: string;
  let spool: FileResultSpool;
  beforeEach(() => {
    root = join(dir, `file-${randomBytes(3).toString('hex')}`);
    spool = new FileResultSpool(root);
  });

  it("keeps segments readable by their owner only: kept results are no other local account's", async () => {
    await spool.put('q1/a.000001', [Buffer.from('private')]);
    expect(statSync(root).mode & 0o777).toBe(0o700);
    expect(statSync(join(root, 'q1')).mode & 0o777).toBe(0o700);
    expect(statSync(join(root, 'q1/a.000001')).mode & 0o777).toBe(0o600);
  });

  it('fails a segment the disk took only part of, leaving nothing under its name', async () => {
    // What a disk that fills part way answers: a short write, no error.
    const handle = await open(join(dir, 'probe'), 'w');
    const proto = Object.getPrototypeOf(handle) as { writev: (...args: unknown[]) => unknown };
    await handle.close();
    const short = jest
      .spyOn(proto, 'writev')
      .mockResolvedValue({ bytesWritten: 3, buffers: [] } as never);
    try {
      await expect(spool.put('q2/a.000001', [Buffer.from('hello world')])).rejects.toThrow(
        /3 of its 11 bytes written/,
      );
    } finally {
      short.mockRestore();
    }
    expect(await keys(spool)).toEqual([]);
  });

  it('lists its segments past a stray file beside their directories', async () => {
    await spool.put('q3/a.000001', [Buffer.from('x')]);
    writeFileSync(join(root, 'stray'), 'not a directory');
    mkdirSync(join(root, 'empty'));
    expect(await keys(spool)).toEqual(['q3/a.000001']);
  });
});
