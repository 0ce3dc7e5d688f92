// The repository's root, settings from the environment and dist/'s modules, with no dependencies:
// for the in-process benches too, whose children must not load service.mjs's pg and ioredis.
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

/** A module of the build, by its path under dist/ (`npm run build` first). */
export function requireDist(file) {
  return require(path.join(ROOT, 'dist', file));
}
