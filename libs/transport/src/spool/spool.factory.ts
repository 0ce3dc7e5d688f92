import type { SpoolSettings } from '@app/config';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FileResultSpool } from './file-result.spool';
import { ResultSpool } from './result.spool';

/**
 * The spool SLUICE_SPOOL_URL names: a directory (`file:`) or an S3-compatible bucket (`s3:`), in
 * the deployment's own part of it (its namespace: a directory, or a key prefix).
 */
export function openSpool(
  settings: Pick<SpoolSettings, 'url' | 'namespace' | 's3Endpoint' | 's3Region'>,
): ResultSpool {
  const url = new URL(settings.url);
  if (url.protocol === 'file:') {
    return new FileResultSpool(join(fileURLToPath(url), settings.namespace));
  }
  const path = decodeURIComponent(url.pathname.replace(/^\/+/, '').replace(/\/+$/, ''));
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the AWS SDK is large: loaded by the first S3 spool, every thread and process without one does not hold it
  const s3 = require('./s3-result.spool') as typeof import('./s3-result.spool');
  return new s3.S3ResultSpool({
    bucket: url.hostname,
    prefix: path ? `${path}/${settings.namespace}/` : `${settings.namespace}/`,
    endpoint: settings.s3Endpoint,
    region: settings.s3Region,
  });
}
