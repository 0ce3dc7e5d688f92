// The repository's root, settings from the environment and dist/'s modules, with no dependencies:
// for the in-process benches too, whose children must not load service.mjs's pg and ioredis.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export function envInt(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0)
    throw new Error(`${name} must be a positive integer, got "${raw}"`);
  return n;
}

const require = createRequire(import.meta.url);

/** Sources newer than dist/ mean the bench measures older code than the tree shows. */
function newestMtime(dir, ext) {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(full, ext));
    else if (entry.name.endsWith(ext) && !entry.name.endsWith('.spec.ts'))
      newest = Math.max(newest, fs.statSync(full).mtimeMs);
  }
  return newest;
}

/** The warning when dist/ is older than a source; checked once, the caller reports it. */
export function staleBuildWarning(root = ROOT) {
  process.env.SLUICE_BENCH_BUILD_CHECKED = '1';
  try {
    const src = Math.max(
      newestMtime(path.join(root, 'apps'), '.ts'),
      newestMtime(path.join(root, 'libs'), '.ts'),
    );
    const built = fs.statSync(path.join(root, 'dist/apps/api/src/main.js')).mtimeMs;
    return src > built
      ? 'warning: some .ts under apps/ or libs/ is newer than dist/: run `npm run build`'
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Warns on stderr when dist/ is older than the sources, once: not again in the same process nor
 * in its children (they inherit the environment), nor after a bench reported it itself.
 */
export function warnIfStale() {
  if (process.env.SLUICE_BENCH_BUILD_CHECKED) return;
  const warning = staleBuildWarning();
  if (warning) console.error(warning);
}

/** A module of the build, by its path under dist/ (`npm run build` first). */
export function requireDist(file) {
  warnIfStale();
  return require(path.join(ROOT, 'dist', file));
}

/**
 * The hard time limit of a script that starts no service (service.mjs's installGuards is the
 * others'): past `ms` it runs `onStop`, says so and exits 2. A timer fires only between callbacks,
 * so a script whose work is synchronous awaits `yieldToTimers()` between runs, and gives a child
 * it waits for synchronously `remaining()` as its timeout.
 */
export function hardTimeLimit(ms, onStop = () => {}) {
  const deadline = Date.now() + ms;
  setTimeout(() => {
    console.error(`bench: hard time limit (${Math.round(ms / 1000)} s) reached, stopping`);
    try {
      onStop();
    } finally {
      process.exit(2);
    }
  }, ms).unref();
  return { remaining: () => Math.max(1, deadline - Date.now()) };
}

/** Lets a timer that is due run (the hard limit's): a 0 ms timer comes after every earlier one. */
export function yieldToTimers() {
  return new Promise((resolve) => setTimeout(resolve, 0));
}
