import { join } from 'node:path';

// test/e2e/sequencer.js: the shards of an e2e pass by how long their files take.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const E2eSequencer = require('./e2e/sequencer.js') as new (options: object) => {
  shard(
    tests: { path: string }[],
    options: { shardIndex: number; shardCount: number },
  ): { path: string }[];
};

const file = (name: string) => ({
  path: join('/repo/test/e2e', `${name}.e2e-spec.ts`),
  context: { config: { rootDir: '/repo' } },
});

describe('E2eSequencer', () => {
  const tests = [
    'faults',
    'async',
    'hostile',
    'cli',
    ...Array.from({ length: 20 }, (_, i) => `small${i}`),
  ].map(file);
  const sequencer = new E2eSequencer({ contexts: [], globalConfig: {} });
  const shards = [1, 2].map((shardIndex) => sequencer.shard(tests, { shardIndex, shardCount: 2 }));

  it('puts every file in exactly one shard', () => {
    const paths = shards.flat().map((t) => t.path);
    expect(new Set(paths).size).toBe(tests.length);
    expect(paths.sort()).toEqual(tests.map((t) => t.path).sort());
  });

  it('spreads the longest files over the shards, not by a hash of their paths', () => {
    // faults (85 s) alone outweighs async and hostile together (80 s): they go to the other shard.
    const names = shards.map((s) => s.map((t) => t.path.split('/').pop()));
    const withFaults = names.find((n) => n.includes('faults.e2e-spec.ts'))!;
    expect(withFaults).not.toContain('async.e2e-spec.ts');
    expect(withFaults).not.toContain('hostile.e2e-spec.ts');
    // By the table's seconds (faults 85, async 45, hostile 35, cli 30, a file not listed 4), the
    // shards end within one small file of each other; jest's hash split gives 146 s and 129 s.
    const seconds: Record<string, number> = { faults: 85, async: 45, hostile: 35, cli: 30 };
    const load = (shard: { path: string }[]) =>
      shard
        .map((t) => t.path.split('/').pop()!.replace('.e2e-spec.ts', ''))
        .reduce((sum, name) => sum + (seconds[name] ?? 4), 0);
    expect(Math.abs(load(shards[0]) - load(shards[1]))).toBeLessThanOrEqual(4);
  });
});
