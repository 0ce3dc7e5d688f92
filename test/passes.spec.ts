import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// test/e2e/passes.sh over stand-in passes: npm scripts of a project of its own that sleep, spin a
// core or fail, so that what it starts when, and what it answers, are seen in seconds.
const root = join(__dirname, '..');

interface Run {
  code: number;
  output: string;
}

function passes(env: Record<string, string>, names: string[]): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-passes-'));
  mkdirSync(join(dir, 'test', 'e2e'), { recursive: true });
  cpSync(join(root, 'test', 'e2e', 'passes.sh'), join(dir, 'test', 'e2e', 'passes.sh'));
  const spin = (seconds: number) =>
    `node -e "const end = Date.now() + ${seconds * 1000}; while (Date.now() < end);"`;
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({
      name: 'stand-ins',
      private: true,
      scripts: {
        spin: spin(22),
        sleep: 'sleep 22',
        quick: 'echo quick ran with $*',
        fails: 'echo about to fail; exit 3',
      },
    }),
  );
  return new Promise((resolve) => {
    execFile(
      'bash',
      [join(dir, 'test', 'e2e', 'passes.sh'), ...names],
      { cwd: dir, env: { ...process.env, ...env }, encoding: 'utf8' },
      (err, stdout, stderr) => {
        rmSync(dir, { recursive: true, force: true });
        resolve({ code: err ? Number(err.code) : 0, output: stdout + stderr });
      },
    );
  });
}

describe('test/e2e/passes.sh', () => {
  it('starts a pass beside another once the CPU it wants idle is, and never while it is not', async () => {
    const [beside, after] = await Promise.all([
      // Nothing wanted idle: the second starts beside the first, 15 s after it.
      passes({ SLUICE_E2E_IDLE_PERCENT: '0' }, ['sleep', 'quick --x']),
      // All of it wanted idle, while one pass spins a core: the next waits for it to end.
      passes({ SLUICE_E2E_IDLE_PERCENT: '100' }, ['spin', 'quick', 'fails']),
    ]);
    expect(beside.code).toBe(0);
    expect(beside.output).toMatch(/== quick --x: started \(2 running/);
    expect(beside.output).toContain('quick ran with --x');
    expect(after.output).toMatch(/== quick: started \(1 running/);
    // A failed pass fails the whole, once every pass has run, with its output.
    expect(after.code).toBe(1);
    expect(after.output).toContain('about to fail');
    expect(after.output).toMatch(/^spin +passed/m);
    expect(after.output).toMatch(/^quick +passed/m);
    expect(after.output).toMatch(/^fails +FAILED \(exit 3\)/m);
    expect(after.output).toContain('failed: fails');
  }, 90_000);

  it('refuses settings that are not whole numbers in range', async () => {
    const settings: Record<string, string>[] = [
      { SLUICE_E2E_PASSES_AT_ONCE: '0' },
      { SLUICE_E2E_PASSES_AT_ONCE: 'two' },
      { SLUICE_E2E_IDLE_PERCENT: '101' },
      { SLUICE_E2E_IDLE_PERCENT: '-5' },
    ];
    for (const env of settings) {
      const run = await passes(env, ['quick']);
      expect(run.code).toBe(2);
      expect(run.output).toMatch(/SLUICE_E2E_(PASSES_AT_ONCE|IDLE_PERCENT): a whole number/);
    }
  });
});
