import Redis from 'ioredis';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

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
});
