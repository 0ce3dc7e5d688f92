import Redis, { Command } from 'ioredis';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { testRedisUrl } from '@test/settings';

/**
 * The patches in patches/ are in effect in the installed packages (npm's postinstall applies
 * them; an install that skipped scripts would run without them). patches/README.md says why each
 * one is there.
 */
describe('patches', () => {
  it('lists only patches this spec checks', () => {
    const patches = readdirSync(join(__dirname, '..', 'patches')).filter((f) =>
      f.endsWith('.patch'),
    );
    expect(patches).toEqual(['ioredis+5.11.1.patch']);
  });

  it('patches the exact ioredis version package.json pins and npm installed', () => {
    const root = join(__dirname, '..');
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const installed = JSON.parse(
      readFileSync(join(root, 'node_modules', 'ioredis', 'package.json'), 'utf8'),
    ) as { version: string };
    // A range would let an install pick a version the patch was not written for.
    expect(pkg.dependencies.ioredis).toBe('5.11.1');
    expect(installed.version).toBe('5.11.1');
  });

  it('gives an ioredis pipeline no accessor of its own: its length comes from the prototype', () => {
    const redis = new Redis({ lazyConnect: true });
    try {
      const pipeline = redis.pipeline().set('a', '1').get('a');
      const multi = redis.multi().get('a');
      // An own accessor (with its own closure) would keep every pipeline alive until a mark-compact.
      expect(Object.getOwnPropertyDescriptor(pipeline, 'length')).toBeUndefined();
      expect(Object.getOwnPropertyDescriptor(multi, 'length')).toBeUndefined();
      expect(pipeline.length).toBe(2);
      // MULTI is queued as a command of its own.
      expect(multi.length).toBe(2);
    } finally {
      redis.disconnect();
    }
  });

  it('writes a Buffer argument of 16 KiB or more as it is, beside the command text: never copied', () => {
    const entry = randomBytes(64 * 1024);
    const pieces = new Command('xadd', ['stream', '*', 'd', entry]).toWritable(
      undefined as never,
    ) as unknown;
    // Unpatched, the command is one new Buffer holding a copy of the entry.
    expect(Array.isArray(pieces)).toBe(true);
    const parts = pieces as Buffer[];
    expect(parts.filter((part) => part === entry)).toHaveLength(1);
    expect(Buffer.concat(parts).toString('latin1')).toBe(
      `*5\r\n$4\r\nxadd\r\n$6\r\nstream\r\n$1\r\n*\r\n$1\r\nd\r\n$65536\r\n` +
        entry.toString('latin1') +
        '\r\n',
    );
    // A smaller Buffer is copied into the command's one Buffer, as published.
    const small = new Command('set', ['k', randomBytes(1024)]).toWritable(undefined as never);
    expect(Buffer.isBuffer(small)).toBe(true);
  });

  it('sends large Buffers whole beside UTF-8 text: alone, in a MULTI, auto-pipelined', async () => {
    const redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
    const piped = new Redis(testRedisUrl, { maxRetriesPerRequest: 1, enableAutoPipelining: true });
    const key = `sluice-test:patches:${randomBytes(6).toString('hex')}:ключ`;
    const big = randomBytes(1024 * 1024 + 3);
    const other = randomBytes(20_000);
    const text = 'ü€'.repeat(12_000);
    try {
      await redis.set(`${key}:plain`, big);
      await redis.multi().set(`${key}:multi`, other).hset(`${key}:h`, 'ф', big, 'é', text).exec();
      await Promise.all([
        piped.set(`${key}:piped`, big),
        piped.set(`${key}:text`, text),
        piped.set(`${key}:piped2`, other),
      ]);
      expect((await redis.getBuffer(`${key}:plain`))!.equals(big)).toBe(true);
      expect((await redis.getBuffer(`${key}:multi`))!.equals(other)).toBe(true);
      expect((await redis.hgetBuffer(`${key}:h`, 'ф'))!.equals(big)).toBe(true);
      expect(await redis.hget(`${key}:h`, 'é')).toBe(text);
      expect((await redis.getBuffer(`${key}:piped`))!.equals(big)).toBe(true);
      expect(await redis.get(`${key}:text`)).toBe(text);
      expect((await redis.getBuffer(`${key}:piped2`))!.equals(other)).toBe(true);
    } finally {
      const suffixes = ['plain', 'multi', 'h', 'piped', 'text', 'piped2'];
      await redis.del(...suffixes.map((suffix) => `${key}:${suffix}`));
      redis.disconnect();
      piped.disconnect();
    }
  });
});
