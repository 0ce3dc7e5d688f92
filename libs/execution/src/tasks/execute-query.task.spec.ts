import { randomUUID } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Piscina } from 'piscina';
import { testDatabaseUrl } from '@test/settings';

const ROOT = join(__dirname, '..', '..', '..', '..');

/** Packages a piscina thread must not load: each thread would hold them in its own heap. */
const HEAVY =
  /^(@nestjs\/|class-validator$|class-transformer$|bullmq$|apache-arrow$|@aws-sdk\/|@smithy\/)/;

/**
 * A piscina task file that loads the TypeScript sources as the build would (SWC, `@app/<lib>` to
 * `libs/<lib>/src`), in the thread's own module cache. Each task requires one module, or calls
 * createEncoder, or opens a spool, and returns the npm packages the thread has loaded so far.
 */
function probeSource(): string {
  return `
    const { readFileSync } = require('node:fs');
    const Module = require('node:module');
    const { join, sep } = require('node:path');
    const { transformSync } = require(${JSON.stringify(require.resolve('@swc/core'))});
    const root = ${JSON.stringify(ROOT)};
    Module._extensions['.ts'] = (module, filename) => {
      const { code } = transformSync(readFileSync(filename, 'utf8'), {
        filename,
        jsc: {
          parser: { syntax: 'typescript', decorators: true },
          transform: { legacyDecorator: true, decoratorMetadata: true },
          target: 'es2022',
        },
        module: { type: 'commonjs' },
      });
      module._compile(code, filename);
    };
    const resolve = Module._resolveFilename;
    Module._resolveFilename = function (request, ...rest) {
      const lib = /^@app\\/([\\w-]+)$/.exec(request);
      return resolve.call(this, lib ? join(root, 'libs', lib[1], 'src') : request, ...rest);
    };
    const marker = sep + 'node_modules' + sep;
    const packageOf = (file) => {
      const at = file.lastIndexOf(marker);
      if (at < 0) return undefined;
      const parts = file.slice(at + marker.length).split(sep);
      return parts[0].startsWith('@') ? parts[0] + '/' + parts[1] : parts[0];
    };
    module.exports = ({ load, encode, spool }) => {
      if (load) require(join(root, load));
      if (encode) require(join(root, 'libs/formats/src')).createEncoder(encode, { queryId: 'q', layout: 'array', columns: [] });
      if (spool) require(join(root, 'libs/transport/src')).openSpool({ url: spool, s3Endpoint: 'http://127.0.0.1:9', s3Region: 'us-east-1' }).close();
      return [...new Set(Object.keys(require.cache).map(packageOf).filter(Boolean))].sort();
    };`;
}

/** What execute-query.task reads from piscina's workerData at load; nothing connects until a task. */
function threadSettings() {
  return {
    databaseUrl: testDatabaseUrl,
    keyPrefix: `sluice-test-${randomUUID()}:`,
    pgPoolSize: 1,
    pgMaxConnectionsPerThread: 1,
    credentialKey: 'a'.repeat(64),
    connectionCounts: new SharedArrayBuffer(4),
    idleCollections: new SharedArrayBuffer(4),
    defaultFetchSize: 1000,
    windowChunks: 8,
    windowBytes: 1 << 20,
    maxEntryBytes: 1 << 20,
    streamTtlSeconds: 60,
    jobRetentionSeconds: 60,
    pgConnectTimeoutMs: 5000,
    clientIdleTimeoutMs: 60_000,
    cancelPollMs: 100,
    nice: 0,
    lastInteractive: new SharedArrayBuffer(8),
    keptBytes: new SharedArrayBuffer(8),
    exportYieldMs: 10,
  };
}

describe('execute-query.task', () => {
  let filename: string;
  let pool: Piscina;

  beforeAll(() => {
    filename = join(tmpdir(), `sluice-task-graph-${process.pid}.js`);
    writeFileSync(filename, probeSource());
  });

  beforeEach(() => {
    // One thread, so that each case sees what its own thread loaded, in order.
    pool = new Piscina({ filename, minThreads: 1, maxThreads: 1, workerData: threadSettings() });
  });

  afterEach(async () => {
    await pool.destroy();
  });

  afterAll(() => rmSync(filename, { force: true }));

  const loaded = (task: { load?: string; encode?: string; spool?: string }) =>
    pool.run(task) as Promise<string[]>;

  it('loads no NestJS, class-validator, class-transformer, BullMQ, Arrow or AWS SDK into a piscina thread', async () => {
    const packages = await loaded({ load: 'libs/execution/src/tasks/execute-query.task.ts' });
    // The task's own drivers are there: the probe sees the thread's module graph.
    expect(packages).toEqual(expect.arrayContaining(['ioredis', 'pg', 'pg-cursor', 'piscina']));
    expect(packages.filter((name) => HEAVY.test(name))).toEqual([]);
  }, 60_000);

  it('loads Arrow in a thread once an Arrow result is asked for', async () => {
    await loaded({ load: 'libs/execution/src/tasks/execute-query.task.ts' });
    expect(await loaded({ encode: 'arrow' })).toContain('apache-arrow');
  }, 60_000);

  it('loads the AWS SDK in a thread once an S3 spool is opened', async () => {
    await loaded({ load: 'libs/execution/src/tasks/execute-query.task.ts' });
    const packages = await loaded({ spool: 's3://bucket/prefix' });
    expect(packages).toEqual(expect.arrayContaining(['@aws-sdk/client-s3']));
  }, 60_000);

  it('sees the packages a module that needs them loads (NestJS, BullMQ, the DTOs)', async () => {
    const packages = await loaded({ load: 'libs/execution/src/pool/query-pool.service.ts' });
    expect(packages).toEqual(expect.arrayContaining(['@nestjs/common']));
    expect(await loaded({ load: 'libs/queue/src/index.ts' })).toContain('bullmq');
    expect(await loaded({ load: 'libs/http-contracts/src/index.ts' })).toEqual(
      expect.arrayContaining(['@nestjs/swagger', 'class-validator']),
    );
  }, 60_000);
});
