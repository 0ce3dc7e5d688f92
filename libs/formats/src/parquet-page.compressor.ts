import { gzipSync } from 'node:zlib';
import { Encoder as ZstdEncoder } from '@toondepauw/node-zstd';
import { compress as snappyCompress } from 'snappyjs';
import { Codec } from './parquet-format';

/** Codec settings of a file's pages. */
export interface PageCompression {
  codec: Codec;
  /** zlib level for GZIP. */
  gzipLevel: number;
  /** zstd level for ZSTD. */
  zstdLevel: number;
}

// One Encoder per level and thread. It holds only the level: each encodeSync makes and frees a
// zstd context of its own, and its output is freed once a collection finds it unreachable (from
// an immediate, so a loop that never yields holds every output: see bench/PARQUET.md).
const zstdEncoders = new Map<number, ZstdEncoder>();

function zstdEncoder(level: number): ZstdEncoder {
  let encoder = zstdEncoders.get(level);
  if (encoder === undefined) {
    encoder = new ZstdEncoder(level);
    zstdEncoders.set(level, encoder);
  }
  return encoder;
}

/** A page's body (levels and values) as the file's codec stores it; the input is not kept. */
export function compressPage(data: Buffer, compression: PageCompression): Buffer {
  switch (compression.codec) {
    case 'UNCOMPRESSED':
      return data;
    case 'GZIP':
      return gzipSync(data, { level: compression.gzipLevel });
    case 'SNAPPY': {
      const out = snappyCompress(data);
      return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
    }
    case 'ZSTD':
      return zstdEncoder(compression.zstdLevel).encodeSync(data);
  }
}
