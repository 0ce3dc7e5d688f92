import { randomUUID } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Piscina } from 'piscina';
import { ownLoginsOf, threadResourceLimits } from './query-pool.service';

/** A task that allocates short-lived objects, then reports the thread's young generation. */
const YOUNG_GENERATION_PROBE = `
  const { getHeapSpaceStatistics } = require('node:v8');
  const { resourceLimits } = require('node:worker_threads');
  module.exports = () => {
    let kept = [];
    for (let i = 0; i < 2e6; i++) {
      kept.push({ i, text: 'value ' + i });
      if (kept.length > 50000) kept = [];
    }
    const newSpace = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
    return { limit: resourceLimits.maxYoungGenerationSizeMb, newSpaceBytes: newSpace.space_size };
  };`;

describe(threadResourceLimits.name, () => {
  const file = join(tmpdir(), `sluice-young-generation-${randomUUID()}.js`);
  beforeAll(() => writeFileSync(file, YOUNG_GENERATION_PROBE));
  afterAll(() => rmSync(file, { force: true }));

  async function probe(youngGenerationMb: number) {
    const pool = new Piscina<undefined, { limit: number; newSpaceBytes: number }>({
      filename: file,
      minThreads: 1,
      maxThreads: 1,
      resourceLimits: threadResourceLimits(youngGenerationMb),
    });
    try {
      return await pool.run(undefined);
    } finally {
      await pool.destroy();
    }
  }

  it("bounds a thread's young generation (its two semi-spaces within the limit)", async () => {
    const { limit, newSpaceBytes } = await probe(12);
    expect(limit).toBe(12);
    expect(newSpaceBytes).toBeLessThanOrEqual(8 * 2 ** 20);
  });

  it('leaves it to V8 at 0, which grows it past that under the same allocations', async () => {
    expect(threadResourceLimits(0)).toEqual({});
    const { newSpaceBytes } = await probe(0);
    expect(newSpaceBytes).toBeGreaterThan(8 * 2 ** 20);
  });
});

describe(ownLoginsOf.name, () => {
  it('names the users of DATABASE_URL and SLUICE_METADATA_DATABASE_URL, each once, decoded', () => {
    expect(
      ownLoginsOf({
        databaseUrl: 'postgres://sluice_control:pw@db/app',
        metadataDatabaseUrl: 'postgres://sluice%20meta:pw@db/meta',
      }),
    ).toEqual(['sluice_control', 'sluice meta']);
    expect(
      ownLoginsOf({
        databaseUrl: 'postgres://same@db/app',
        metadataDatabaseUrl: 'postgres://same@db/app',
      }),
    ).toEqual(['same']);
    // No user in the URL (the OS user's name): nothing to name.
    expect(
      ownLoginsOf({ databaseUrl: 'postgres://db/app', metadataDatabaseUrl: undefined }),
    ).toEqual([]);
  });
});
