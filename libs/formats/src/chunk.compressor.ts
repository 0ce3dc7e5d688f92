import { promisify } from 'node:util';
import {
  BrotliCompress,
  Gzip,
  brotliCompress,
  constants,
  createBrotliCompress,
  createGzip,
  gzip,
} from 'node:zlib';
import { ContentEncoding } from '@app/contracts';

/**
 * Brotli quality for a requested level 1–9. Brotli's own high qualities are far slower than
 * gzip's (measured: quality 6 at 9 MB/s, 9 at 4 MB/s, against gzip-9 at 25 MB/s), so 1–9 is
 * spread over qualities 1–5 to keep high levels usable on large results. A level may still end
 * up with a lower quality than this: see ChunkCompressor.
 */
export const BROTLI_QUALITY: Record<number, number> = {
  1: 1,
  2: 1,
  3: 2,
  4: 2,
  5: 3,
  6: 3,
  7: 4,
  8: 4,
  9: 5,
};

/** Level used when the client names an encoding but no Preferred-Compression-Level. */
export const DEFAULT_COMPRESSION_LEVEL = 3;

/** How much of the body's beginning the settings are tried on. */
export const TRIAL_BYTES = 64 * 1024;
/** A level takes its own setting only if the trial is this much smaller than the level below's. */
export const STEP_GAIN = 0.01;
/**
 * Brotli leaves quality 1 only for a quality whose trial is this much smaller than quality 1's:
 * its trial gains hold less well over a whole body. On rows of random numbers and digests,
 * qualities 2–5 won by 1–2% on the first 64 KiB and lost by 2% over 20,000 rows; where they won
 * by 5% or more on the trial (ordinary rows, 1M rows of the issue's mix) they also won over the
 * whole body (bench/RESULTS.md, issue 39).
 */
export const BROTLI_GAIN_OVER_FIRST = 0.05;
/**
 * Brotli stays at quality 1 on text that quality 1 leaves larger than this fraction of itself:
 * on such high-entropy text the higher qualities lose to it as the stream goes on, even where
 * they win on the first rows (measured: +3% to +9% over 1.4 MB).
 */
export const DENSE_TEXT_RATIO = 0.4;

const BROTLI_WINDOW_BITS = 20;

const gzipAsync = promisify(gzip);
const brotliAsync = promisify(brotliCompress);

/** zlib level (gzip) or brotli quality that `level` asks for, before the trial. */
function settingOf(encoding: ContentEncoding, level: number): number {
  if (encoding === 'gzip') return level;
  return BROTLI_QUALITY[level] ?? BROTLI_QUALITY[DEFAULT_COMPRESSION_LEVEL];
}

function brotliParams(quality: number): Record<number, number> {
  return {
    [constants.BROTLI_PARAM_QUALITY]: quality,
    [constants.BROTLI_PARAM_LGWIN]: BROTLI_WINDOW_BITS,
  };
}

async function trialSize(encoding: ContentEncoding, setting: number, sample: Buffer) {
  const out =
    encoding === 'gzip'
      ? await gzipAsync(sample, { level: setting })
      : await brotliAsync(sample, { params: brotliParams(setting) });
  return out.length;
}

/**
 * The setting a level compresses with: a higher level must never compress worse than a lower
 * one, and neither brotli's qualities nor zlib's levels promise that. Measured on 1.4 MB of JSON
 * rows flushed every 1000 rows: on hex digests and random digits brotli quality 1 (which
 * compresses each block on its own) beats qualities 2–5 by 3–9%, and gzip 6–8 can come out a
 * few bytes larger than the level below; on ordinary rows (an orders table) the higher settings
 * win by 10–20%. No fixed mapping suits both, so each level's setting is tried on the body's first
 * bytes and kept only if it beats the setting chosen for the level below by a clear margin;
 * brotli leaves quality 1 only for a trial 5% smaller than quality 1's (BROTLI_GAIN_OVER_FIRST)
 * and never on high-entropy text. Otherwise the level takes the setting chosen below it. The
 * choice is thus never slower than the level's own setting, and its trial size
 * never grows with the level.
 */
export async function chooseSetting(
  encoding: ContentEncoding,
  level: number,
  sample: Buffer,
): Promise<number> {
  const settings: number[] = [];
  for (let l = 1; l <= level; l++) {
    const s = settingOf(encoding, l);
    if (!settings.includes(s)) settings.push(s);
  }
  if (settings.length === 1 || sample.length === 0) return settings[0];
  const first = await trialSize(encoding, settings[0], sample);
  if (encoding === 'br' && first > sample.length * DENSE_TEXT_RATIO) return settings[0];
  const sizes = [
    first,
    ...(await Promise.all(settings.slice(1).map((s) => trialSize(encoding, s, sample)))),
  ];
  const gate = encoding === 'br' ? first * (1 - BROTLI_GAIN_OVER_FIRST) : Infinity;
  let chosen = 0;
  for (let i = 1; i < settings.length; i++) {
    if (sizes[i] < sizes[chosen] * (1 - STEP_GAIN) && sizes[i] < gate) chosen = i;
  }
  return settings[chosen];
}

/**
 * Compresses a response body chunk by chunk and flushes after each, so that the client can
 * decompress and use the first rows before the last are read. The setting is chosen (see
 * chooseSetting) on the first rows: what comes before them is held until they come. Calls are
 * sequential (each awaited before the next).
 */
export class ChunkCompressor {
  private stream: Gzip | BrotliCompress | undefined;
  private readonly out: Buffer[] = [];
  private readonly held: Buffer[] = [];
  private destroyed = false;
  private readonly flushKind: number;
  /** The zlib level or brotli quality in use; undefined until the first rows came. */
  setting: number | undefined;

  constructor(
    private readonly encoding: ContentEncoding,
    private readonly level: number,
  ) {
    this.flushKind =
      encoding === 'gzip' ? constants.Z_SYNC_FLUSH : constants.BROTLI_OPERATION_FLUSH;
  }

  /** Keeps `chunk` (a body's head) to go out with the first rows; returns nothing yet. */
  hold(chunk: Buffer): Promise<Buffer> {
    if (this.stream) return this.push(chunk);
    if (chunk.length > 0) this.held.push(chunk);
    return Promise.resolve(Buffer.alloc(0));
  }

  /** The compressed bytes of `chunk` (and of what was held), flushed so that they decode on their own. */
  async push(chunk: Buffer): Promise<Buffer> {
    const stream = await this.open(chunk);
    if (chunk.length > 0) stream.write(chunk);
    await new Promise<void>((resolve) => stream.flush(this.flushKind, () => resolve()));
    return this.take();
  }

  /** The compressed bytes of the last chunk and the end of the compressed stream. */
  async finish(chunk: Buffer): Promise<Buffer> {
    const stream = await this.open(chunk);
    await new Promise<void>((resolve, reject) => {
      stream.once('end', resolve);
      stream.once('error', reject);
      stream.end(chunk);
    });
    return this.take();
  }

  /** Releases the compressor's memory without producing more output. Idempotent. */
  destroy(): void {
    this.destroyed = true;
    this.held.length = 0;
    this.stream?.destroy();
  }

  /** The stream, created on the first rows with the setting they call for; held bytes written. */
  private async open(chunk: Buffer): Promise<Gzip | BrotliCompress> {
    if (this.stream) return this.stream;
    const held = this.held.splice(0);
    const sample = Buffer.concat([...held, chunk]).subarray(0, TRIAL_BYTES);
    const setting = await chooseSetting(this.encoding, this.level, sample);
    if (this.destroyed) throw new Error('the compressor was destroyed');
    this.setting = setting;
    const stream =
      this.encoding === 'gzip'
        ? createGzip({ level: setting })
        : createBrotliCompress({ params: brotliParams(setting) });
    stream.on('data', (c: Buffer) => this.out.push(c));
    for (const h of held) stream.write(h);
    this.stream = stream;
    return stream;
  }

  private take(): Buffer {
    const bytes = this.out.length === 1 ? this.out[0] : Buffer.concat(this.out);
    this.out.length = 0;
    return bytes;
  }
}
