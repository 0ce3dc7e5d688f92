import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const BENCH = join(__dirname, '..', 'bench');

/** A checkout of its own: bench/lib/env.mjs, one source and a dist/ built `distAge` s after it. */
function checkout(distAge: number): string {
  const root = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
  mkdirSync(join(root, 'bench', 'lib'), { recursive: true });
  copyFileSync(join(BENCH, 'lib', 'env.mjs'), join(root, 'bench', 'lib', 'env.mjs'));
  mkdirSync(join(root, 'apps'));
  mkdirSync(join(root, 'libs'));
  mkdirSync(join(root, 'dist', 'apps', 'api', 'src'), { recursive: true });
  writeFileSync(join(root, 'libs', 'a.ts'), '');
  writeFileSync(join(root, 'dist', 'apps', 'api', 'src', 'main.js'), '');
  writeFileSync(join(root, 'dist', 'm.js'), 'module.exports = 42;');
  const now = Date.now() / 1000;
  utimesSync(join(root, 'libs', 'a.ts'), now, now);
  utimesSync(join(root, 'dist', 'apps', 'api', 'src', 'main.js'), now + distAge, now + distAge);
  return root;
}

/** Loads dist/m.js twice through requireDist, as a bench and then its child would. */
function loadTwice(root: string): { stdout: string; stderr: string } {
  const env = { ...process.env };
  delete env.SLUICE_BENCH_BUILD_CHECKED;
  const script = `const { requireDist } = await import(${JSON.stringify(join(root, 'bench', 'lib', 'env.mjs'))});
console.log(requireDist('m.js') + requireDist('m.js'));`;
  const res = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
    env,
  });
  return { stdout: res.stdout, stderr: res.stderr };
}

/** The bench scripts, by file name. */
const scripts = () => readdirSync(BENCH).filter((f) => f.endsWith('.mjs'));

/** A bench script's code without its comment lines. */
const codeOf = (file: string) =>
  readFileSync(join(BENCH, file), 'utf8')
    .split('\n')
    .filter((line) => !/^\s*(\/\/|\*|\/\*)/.test(line))
    .join('\n');

describe('bench scripts', () => {
  it('warn once on stderr when they load a dist/ older than a source under apps/ or libs/', () => {
    const stale = checkout(-60);
    const fresh = checkout(60);
    try {
      const old = loadTwice(stale);
      expect(old.stdout).toBe('84\n');
      expect(old.stderr.match(/newer than dist\//g)).toHaveLength(1);
      expect(loadTwice(fresh)).toEqual({ stdout: '84\n', stderr: '' });
    } finally {
      rmSync(stale, { recursive: true, force: true });
      rmSync(fresh, { recursive: true, force: true });
    }
  });

  it('reach dist/ only through what warns: requireDist, startSluice, or a check of their own', () => {
    const silent = scripts().filter((f) => {
      // Code only: a comment may name dist/ freely.
      const code = codeOf(f);
      const loadsDist = /requireDist\(|startSluice\(|['"`][^'"`\n]*dist\//.test(code);
      const warns = /requireDist\(|startSluice\(|staleBuildWarning\(|warnIfStale\(/.test(code);
      return loadsDist && !warns;
    });
    expect(silent).toEqual([]);
  });

  it('each set a hard time limit: installGuards, or hardTimeLimit for those that start no service', () => {
    const unbounded = scripts().filter((f) => !/\b(installGuards|hardTimeLimit)\(/.test(codeOf(f)));
    // small-queries.mjs's floors: its children, which run until Ctrl-C when started alone.
    expect(unbounded).toEqual(['direct-baseline.mjs', 'skeleton-baseline.mjs']);
  });

  it('stop at hardTimeLimit even when their work is synchronous, if they yield between runs', () => {
    const script = `const { hardTimeLimit, yieldToTimers } = await import(${JSON.stringify(join(BENCH, 'lib', 'env.mjs'))});
hardTimeLimit(200);
const until = Date.now() + 10_000;
while (Date.now() < until) {
  const run = Date.now() + 50;
  while (Date.now() < run);
  await yieldToTimers();
}
console.log('not stopped');`;
    const started = Date.now();
    const res = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
    });
    expect(res.status).toBe(2);
    expect(res.stdout).toBe('');
    expect(res.stderr).toMatch(/hard time limit \(\d+ s\) reached/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("split a process's CPU between its main thread and its other threads", () => {
    // A worker thread spins for 400 ms of CPU while the main thread waits for it: bounded by CPU
    // time, not by the clock, so that a loaded machine changes nothing but how long it takes.
    const script = `const { cpuSnapshot, cpuPercent, mainThreadPercent } = await import(${JSON.stringify(join(BENCH, 'lib', 'service.mjs'))});
const { Worker } = await import('node:worker_threads');
const before = cpuSnapshot({ me: [process.pid] });
const spin = new Worker('const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; }; const until = cpu() + 400; let x = 0; while (cpu() < until) for (let i = 0; i < 1e6; i++) x += Math.sqrt(i);', { eval: true });
await new Promise((resolve) => spin.on('exit', resolve));
const after = cpuSnapshot({ me: [process.pid] });
const seconds = (after.at - before.at) / 1000;
const ms = (percent) => percent * seconds * 10;
console.log(JSON.stringify({ all: ms(cpuPercent(before, after).me), main: ms(mainThreadPercent(before, after).me) }));`;
    const res = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
    });
    expect(res.stderr).toBe('');
    // CPU milliseconds (ticks of 10 ms).
    const { all, main } = JSON.parse(res.stdout) as { all: number; main: number };
    expect(all - main).toBeGreaterThanOrEqual(300);
    expect(main).toBeLessThan(150);
  });

  it("count a process's context switches, every thread's, voluntary apart from involuntary", () => {
    // A worker thread that sleeps 200 times blocks 200 times (voluntary); then one spinning thread
    // more than there are cores, each for 150 ms of CPU, makes the scheduler take the CPU from
    // some of them (involuntary). Only live threads are counted, so each thread stays until the
    // snapshot after its work (as a service's threads do); other threads' switches add to the
    // counts, never take away.
    const script = `const { cpuSnapshot, switchCounts } = await import(${JSON.stringify(join(BENCH, 'lib', 'service.mjs'))});
const { Worker } = await import('node:worker_threads');
const { availableParallelism } = await import('node:os');
// Eval'd as modules here (the parent is one): the import comes first, the work runs after it.
const port = "const { parentPort } = await import('node:worker_threads');";
const park = "parentPort.postMessage('done'); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);";
const phase = async (code, threads) => {
  const before = cpuSnapshot({ me: [process.pid] });
  const workers = Array.from({ length: threads }, () => new Worker(port + code + park, { eval: true }));
  await Promise.all(workers.map((w) => new Promise((resolve) => w.once('message', resolve))));
  const counted = switchCounts(before, cpuSnapshot({ me: [process.pid] })).me;
  await Promise.all(workers.map((w) => w.terminate()));
  return counted;
};
const sleeping = await phase('const a = new Int32Array(new SharedArrayBuffer(4)); for (let i = 0; i < 200; i++) Atomics.wait(a, 0, 0, 1);', 1);
const spinning = await phase('const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; }; const until = cpu() + 150; let x = 0; while (cpu() < until) for (let i = 0; i < 1e5; i++) x += Math.sqrt(i);', availableParallelism() + 1);
const idle = cpuSnapshot({ me: [process.pid] });
console.log(JSON.stringify({ sleeping, spinning, none: switchCounts(idle, idle).me }));`;
    const res = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
    });
    expect(res.stderr).toBe('');
    const { sleeping, spinning, none } = JSON.parse(res.stdout) as Record<
      string,
      { voluntary: number; involuntary: number }
    >;
    expect(sleeping.voluntary).toBeGreaterThanOrEqual(200);
    // A bound, not a figure: the main thread's and V8's own waits meanwhile are counted too.
    expect(sleeping.voluntary).toBeLessThan(2_000);
    expect(sleeping.involuntary).toBeLessThan(sleeping.voluntary);
    expect(spinning.involuntary).toBeGreaterThanOrEqual(1);
    expect(none).toEqual({ voluntary: 0, involuntary: 0 });
  });

  it("tell a process's CPU in the kernel from its own code", () => {
    // 300 ms of CPU reading /dev/zero 8 MiB at a time (the kernel fills the buffer), then 300 ms
    // of CPU computing: bounded by CPU time (read between pieces of work, as getrusage is itself a
    // system call), so the shares do not depend on the machine's load. The kernel splits a
    // process's time into user and system by sampling ticks, and under a CI pass beside it the
    // reading's share fell to 0.5 (1 MiB reads; 0.67-0.79 at rest, 0.8-0.9 with 8 MiB): the
    // bounds below still fail a share that is swapped, summed or not counted.
    const script = `const { cpuSnapshot, cpuPercent, systemPercent } = await import(${JSON.stringify(join(BENCH, 'lib', 'service.mjs'))});
const fs = await import('node:fs');
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const share = (work) => {
  const before = cpuSnapshot({ me: [process.pid] });
  const until = cpu() + 300;
  while (cpu() < until) work();
  const after = cpuSnapshot({ me: [process.pid] });
  return systemPercent(before, after).me / cpuPercent(before, after).me;
};
const fd = fs.openSync('/dev/zero', 'r');
const buffer = Buffer.alloc(1 << 23);
const reading = share(() => fs.readSync(fd, buffer, 0, buffer.length, null));
const spinning = share(() => { let x = 0; for (let i = 0; i < 1e6; i++) x += Math.sqrt(i); return x; });
console.log(JSON.stringify({ reading, spinning }));`;
    const res = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
    });
    expect(res.stderr).toBe('');
    const { reading, spinning } = JSON.parse(res.stdout) as { reading: number; spinning: number };
    expect(reading).toBeGreaterThan(0.4);
    expect(spinning).toBeLessThan(0.2);
    expect(reading - spinning).toBeGreaterThan(0.3);
  });
});
