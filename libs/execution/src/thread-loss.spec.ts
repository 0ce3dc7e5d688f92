import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Piscina } from 'piscina';
import { threadLoss } from './job.lifecycle';

/**
 * How piscina fails the tasks of a thread that ran out of memory, as threadLoss reads it: this
 * fails when a piscina or Node release changes the shape.
 */
describe(threadLoss.name, () => {
  it("reads a real thread's death by out of memory, for every task it ran, and the pool goes on", async () => {
    const filename = join(tmpdir(), `sluice-oom-${process.pid}.js`);
    writeFileSync(
      filename,
      `module.exports = async ({ grow, quick }) => {
        if (quick) return 'done';
        if (!grow) return new Promise((resolve) => setTimeout(() => resolve('done'), 5000));
        const kept = [];
        for (;;) kept.push('x'.repeat(1e6) + Math.random());
      };`,
    );
    const pool = new Piscina({
      filename,
      maxThreads: 1,
      minThreads: 1,
      concurrentTasksPerWorker: 2,
      resourceLimits: { maxOldGenerationSizeMb: 32 },
    });
    try {
      const failures = await Promise.all(
        [{ grow: false }, { grow: true }].map((task) =>
          pool.run(task).then(
            () => undefined,
            (err: unknown) => err,
          ),
        ),
      );
      expect(failures.map(threadLoss)).toEqual([
        'the worker thread running the query ran out of memory',
        'the worker thread running the query ran out of memory',
      ]);
      // The pool starts another thread in its place.
      expect(await pool.run({ quick: true })).toBe('done');
    } finally {
      await pool.destroy();
      rmSync(filename, { force: true });
    }
  }, 30_000);

  it('reads nothing into an error of the task itself', () => {
    expect(threadLoss(new Error('relation "x" does not exist'))).toBeUndefined();
    expect(threadLoss(undefined)).toBeUndefined();
  });
});
