import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import type { FileMetaData } from 'hyparquet';

/*
 * The independent reader is hyparquet. It is ESM-only, which jest on Node 20 cannot load: it runs
 * in a plain node process (Node >= 20.19 requires ESM), reading the file from stdin and printing
 * the metadata and every row as JSON — raw µs, days and JSON text, no lossy conversions.
 */
const READER = `
const { parquetMetadata, parquetReadObjects } = require('hyparquet');
const { compressors } = require('hyparquet-compressors');
const data = require('node:fs').readFileSync(0);
const file = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
const tag = (k, v) =>
  typeof v === 'bigint' ? { $bigint: String(v) }
  : v instanceof Uint8Array ? { $bytes: Buffer.from(v).toString('hex') }
  : typeof v === 'number' && !Number.isFinite(v) ? { $number: String(v) }
  : v === undefined ? null : v;
parquetReadObjects({
  file,
  utf8: false,
  compressors,
  parsers: {
    timestampFromMicroseconds: (v) => v,
    dateFromDays: (v) => v,
    jsonFromBytes: (v) => v && Buffer.from(v).toString('utf8'),
  },
}).then((rows) => process.stdout.write(JSON.stringify({ meta: parquetMetadata(file), rows }, tag)));
`;
const ROOT = join(__dirname, '../..');

function untag(_key: string, v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if ('$bigint' in v) return BigInt(v.$bigint as string);
  if ('$bytes' in v) return new Uint8Array(Buffer.from(v.$bytes as string, 'hex'));
  if ('$number' in v) return Number(v.$number);
  return v;
}

/** hyparquet's reading of a Parquet file: its metadata and every row. */
export function readBack(file: Buffer): { meta: FileMetaData; rows: Record<string, unknown>[] } {
  const run = spawnSync(process.execPath, ['-e', READER], {
    cwd: ROOT,
    input: file,
    maxBuffer: 1 << 28,
  });
  if (run.status !== 0) throw new Error(`hyparquet: ${run.stderr.toString()}`);
  return JSON.parse(run.stdout.toString(), untag) as ReturnType<typeof readBack>;
}
