import { brotliDecompressSync, createGunzip, gunzipSync } from 'node:zlib';
import { ChunkCompressor } from './chunk.compressor';

describe(ChunkCompressor.name, () => {
  it.each([
    ['gzip', 1],
    ['gzip', 9],
    ['br', 1],
    ['br', 9],
  ] as const)('round-trips a body written in chunks with %s level %d', async (encoding, level) => {
    const compressor = new ChunkCompressor(encoding, level);
    const parts = ['{"data":[', '[1,"a"],'.repeat(1000), '[2,"b"]', ']}'];
    const out: Buffer[] = [];
    for (const part of parts.slice(0, -1)) out.push(await compressor.push(Buffer.from(part)));
    out.push(await compressor.finish(Buffer.from(parts[parts.length - 1])));
    const body = Buffer.concat(out);
    const plain = encoding === 'gzip' ? gunzipSync(body) : brotliDecompressSync(body);
    expect(plain.toString()).toBe(parts.join(''));
    expect(body.length).toBeLessThan(parts.join('').length / 5);
  });

  it('makes every flushed chunk decodable before the stream ends', async () => {
    const compressor = new ChunkCompressor('gzip', 6);
    const first = await compressor.push(Buffer.from('first rows\n'));
    const gunzip = createGunzip();
    const seen: string[] = [];
    gunzip.on('data', (d: Buffer) => seen.push(d.toString()));
    gunzip.write(first);
    await new Promise((r) => setTimeout(r, 20));
    expect(seen.join('')).toBe('first rows\n');
    compressor.destroy();
    gunzip.destroy();
  });
});
