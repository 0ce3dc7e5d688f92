import type { SpoolSettings } from '@app/config';
import { fileURLToPath } from 'node:url';
import { FileResultSpool } from './file-result.spool';
import { ResultSpool } from './result.spool';
import { S3ResultSpool } from './s3-result.spool';

/** The spool SLUICE_SPOOL_URL names: a directory (`file:`) or an S3-compatible bucket (`s3:`). */
export function openSpool(settings: SpoolSettings): ResultSpool {
  const url = new URL(settings.url);
  if (url.protocol === 'file:') return new FileResultSpool(fileURLToPath(url));
  const path = decodeURIComponent(url.pathname.replace(/^\/+/, '').replace(/\/+$/, ''));
  return new S3ResultSpool({
    bucket: url.hostname,
    prefix: path ? `${path}/` : '',
    endpoint: settings.s3Endpoint,
    region: settings.s3Region,
  });
}
