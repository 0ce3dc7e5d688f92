import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Secrets standalone mode generates once and keeps in its data directory. */
export interface StandaloneState {
  jwtSecret: string;
  adminPassword: string;
  superuserPassword: string;
  /** Password of the control login (sluice_control). */
  controlPassword: string;
  /** SLUICE_CREDENTIAL_KEY: login-role passwords and sealed credentials derive from it. */
  credentialKey: string;
}

const secret = (bytes: number) => randomBytes(bytes).toString('base64url');

/**
 * Reads the state file, creating it (mode 600) with fresh secrets on first start; a file from an
 * earlier version gets the secrets it lacks.
 */
export function loadStandaloneState(dataDir: string): StandaloneState {
  const file = join(dataDir, 'standalone.json');
  let stored: Partial<StandaloneState> & { authenticatorPassword?: string } = {};
  try {
    stored = JSON.parse(readFileSync(file, 'utf8')) as typeof stored;
  } catch (err) {
    // Only a first start has no file: one that cannot be read must not be overwritten, it holds
    // the passwords of the embedded PostgreSQL.
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new Error(`cannot read ${file}: ${(err as Error).message}`, { cause: err });
    }
    mkdirSync(dataDir, { recursive: true, mode: 0o755 });
  }
  const state: StandaloneState = {
    jwtSecret: stored.jwtSecret ?? secret(32),
    adminPassword: stored.adminPassword ?? secret(12),
    superuserPassword: stored.superuserPassword ?? secret(24),
    controlPassword: stored.controlPassword ?? stored.authenticatorPassword ?? secret(24),
    credentialKey: stored.credentialKey ?? secret(32),
  };
  if (Object.keys(state).some((k) => stored[k as keyof StandaloneState] === undefined)) {
    writeFileSync(file, JSON.stringify(state, null, 2) + '\n', { mode: 0o600 });
  }
  return state;
}
