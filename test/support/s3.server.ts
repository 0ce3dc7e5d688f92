import S3rver from 's3rver';
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

/** Starts s3rver (a registry package, pure JavaScript) with the bucket `bucket`. */
export async function startS3Server(bucket = 'sluice-spool'): Promise<TestS3Server> {
  const directory = mkdtempSync(join(tmpdir(), 'sluice-s3-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await server.run();
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
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
