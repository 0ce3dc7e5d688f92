import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** s3rver's own credentials: any SDK client of the suite's fake S3 signs with these. */
export const S3RVER_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

/** An S3-compatible server on loopback, its data in a directory of its own, with one bucket. */
export interface TestS3Server {
  endpoint: string;
  bucket: string;
  /** The env a Sluice process needs to spool to it (SLUICE_SPOOL_URL with `prefix`). */
  env(prefix: string): Record<string, string>;
  stop(): Promise<void>;
}

/**
 * Runs s3rver; prints its port. In a process of its own: the e2e suite's global set-up shares
 * its event loop with the specs, and a spec blocked in spawnSync (curl) would block the store
 * the service reads from while it waits for the service.
 */
const SERVER = `
  const S3rver = require('s3rver');
  // s3rver keeps objects as files and removes a directory once it is empty; two deletes in one
  // directory at once race on that (one finds it gone: a 500, again on every retry). S3 has no
  // directories: its deletes are taken one at a time here, which the race cannot meet.
  const Store = require('s3rver/lib/stores/filesystem');
  const deleteObject = Store.prototype.deleteObject;
  let deletes = Promise.resolve();
  Store.prototype.deleteObject = function (...args) {
    const next = deletes.then(() => deleteObject.apply(this, args));
    deletes = next.catch(() => undefined);
    return next;
  };
  const [directory, bucket] = process.argv.slice(1);
  new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] })
    .run()
    .then(({ port }) => process.stdout.write(JSON.stringify({ port }) + '\\n'));`;

/** Starts s3rver (a registry package, pure JavaScript) with the bucket `bucket`. */
export async function startS3Server(bucket = 'sluice-spool'): Promise<TestS3Server> {
  const directory = mkdtempSync(join(tmpdir(), 'sluice-s3-'));
  const child = spawn(process.execPath, ['-e', SERVER, directory, bucket], {
    cwd: join(__dirname, '..', '..'),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await Promise.race([
    once(child.stdout, 'data'),
    once(child, 'exit').then(() => {
      throw new Error('s3rver exited before it listened');
    }),
  ])) as [Buffer];
  const { port } = JSON.parse(line.toString()) as { port: number };
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    env: (prefix) => ({
      SLUICE_SPOOL_URL: `s3://${bucket}/${prefix}`,
      SLUICE_SPOOL_S3_ENDPOINT: endpoint,
      AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
      AWS_REGION: 'us-east-1',
    }),
    stop: async () => {
      if (child.exitCode === null) {
        child.kill();
        await once(child, 'exit');
      }
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
