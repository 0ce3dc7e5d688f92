import { createHash, randomBytes } from 'node:crypto';
import { ResultFormat, okStatus } from '@app/contracts';
import { jsonValueEncoder } from '@app/sql';
import { ChunkCompressor } from './chunk.compressor';
import { SUPPORTED_FORMATS, createEncoder } from './encoders';
import { ParquetEncoder } from './parquet.encoder';
import { EncoderColumn, ResultEncoder, TextRow } from './result.encoder';
import { RowBatch } from './row.batch';

function column(name: string, type: string, oid: number): EncoderColumn {
  return { name, type, oid, json: jsonValueEncoder(oid, () => undefined) };
}

const COLUMNS = [column('g', 'integer', 23), column('t', 'text', 25)];
const OPTIONS = {
  queryId: '00000000-0000-4000-8000-000000000000',
  layout: 'array',
  columns: COLUMNS,
} as const;

function rows(from: number, count: number): TextRow[] {
  const out: TextRow[] = [];
  for (let g = from; g < from + count; g++) {
    out.push([String(g), createHash('md5').update(String(g)).digest('hex').repeat(2)]);
  }
  return out;
}

/** Parquet with row groups small enough that each batch ends one: bytes come from rows() too. */
function encoderOf(format: ResultFormat): ResultEncoder {
  return format === 'parquet'
    ? new ParquetEncoder(OPTIONS, { rowGroupBytes: 64 * 1024, codec: 'UNCOMPRESSED' })
    : createEncoder(format, OPTIONS);
}

/**
 * The worker hands what an encoder returns to the result channel, which writes a Buffer of 16 KiB
 * or more to Redis by reference, after the encoder has gone on to the next batch
 * (patches/README.md): what an encoder returned must never change afterwards.
 */
describe('what an encoder returns', () => {
  it.each(SUPPORTED_FORMATS.map((format) => [format]))(
    'is never written over by its later calls (%s)',
    (format) => {
      const encoder = encoderOf(format);
      const returned: { bytes: Buffer; copy: Buffer }[] = [];
      const keep = (bytes: Buffer | null) => {
        if (bytes) returned.push({ bytes, copy: Buffer.from(bytes) });
      };
      keep(encoder.head());
      for (let batch = 0; batch < 4; batch++) {
        keep(encoder.rows(RowBatch.fromText(rows(batch * 3000, 3000)), 1000));
      }
      keep(encoder.end(okStatus()));
      // Several large outputs: the case the by-reference write is for.
      expect(returned.filter(({ bytes }) => bytes.length >= 16 * 1024).length).toBeGreaterThan(2);
      for (const { bytes, copy } of returned) expect(bytes.equals(copy)).toBe(true);
    },
  );

  it.each([['gzip'], ['br']] as const)(
    'is never written over once compressed either (%s)',
    async (encoding) => {
      const encoder = createEncoder('ndjson', OPTIONS);
      const compressor = new ChunkCompressor(encoding, 1);
      const returned: { bytes: Buffer; copy: Buffer }[] = [];
      const keep = (bytes: Buffer) => returned.push({ bytes, copy: Buffer.from(bytes) });
      keep(await compressor.hold(encoder.head()));
      for (let batch = 0; batch < 4; batch++) {
        // Random text: compressed, each chunk stays large.
        const text = rows(batch * 3000, 3000).map(([g]) => [g, randomBytes(24).toString('hex')]);
        keep(await compressor.push(encoder.rows(RowBatch.fromText(text), 1000)));
      }
      keep(await compressor.finish(encoder.end(okStatus())!));
      expect(returned.filter(({ bytes }) => bytes.length >= 16 * 1024).length).toBeGreaterThan(2);
      for (const { bytes, copy } of returned) expect(bytes.equals(copy)).toBe(true);
    },
  );
});
