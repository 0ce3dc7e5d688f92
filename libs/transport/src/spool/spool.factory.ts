import type { SpoolSettings } from '@app/config';
import { fileURLToPath } from 'node:url';
import { FileResultSpool } from './file-result.spool';
import { ResultSpool } from './result.spool';

/** The spool SLUICE_SPOOL_URL names: a directory (`file:`) or an S3-compatible bucket (`s3:`). */
export function openSpool(settings: SpoolSettings): ResultSpool {
  const url = new URL(settings.url);
  if (url.protocol === 'file:') return new FileResultSpool(fileURLToPath(url));
  const path = decodeURIComponent(url.pathname.replace(/^\/+/, '').replace(/\/+$/, ''));
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the AWS SDK is large: loaded by the first S3 spool, every thread and process without one does not hold it
  const s3 = require('./s3-result.spool') as typeof import('./s3-result.spool');
  return new s3.S3ResultSpool({
    bucket: url.hostname,
    prefix: path ? `${path}/` : '',
    endpoint: settings.s3Endpoint,
    region: settings.s3Region,
  });
}
