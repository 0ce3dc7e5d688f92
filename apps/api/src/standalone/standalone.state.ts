import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Secrets standalone mode generates once and keeps in its data directory. */
export interface StandaloneState {
  jwtSecret: string;
  adminPassword: string;
  superuserPassword: string;
  authenticatorPassword: string;
}

const secret = (bytes: number) => randomBytes(bytes).toString('base64url');

/** Reads the state file, creating it (mode 600) with fresh secrets on first start. */
export function loadStandaloneState(dataDir: string): StandaloneState {
  const file = join(dataDir, 'standalone.json');
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as StandaloneState;
  } catch {
    mkdirSync(dataDir, { recursive: true, mode: 0o755 });
    const state: StandaloneState = {
      jwtSecret: secret(32),
      adminPassword: secret(12),
      superuserPassword: secret(24),
      authenticatorPassword: secret(24),
    };
    writeFileSync(file, JSON.stringify(state, null, 2) + '\n', { mode: 0o600 });
    return state;
  }
}
