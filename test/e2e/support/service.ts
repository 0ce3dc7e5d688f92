import { ChildProcess, spawn } from 'node:child_process';
import { freePort } from '../../support/free-port';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ServiceDatabase } from './roles';

/** Where the suite's services listen, and how to log in; passed to tests through the env. */
export interface E2eEnvironment {
  mode: 'cluster' | 'standalone';
  /** First api; requests are spread over `baseUrls` (two apis in cluster mode). */
  baseUrl: string;
  baseUrls: string[];
  /** Queries that can run at once, all workers together. */
  capacity: number;
  /**
   * Queries of one user that run at once, all workers together: each worker's share for one user
   * (SLUICE_WORKER_USER_SHARE_PERCENT, default half its slots) summed.
   */
  userSlots: number;
  /**
   * Queries of one user that run at once while no other user's query waits: each worker's slots
   * but one (at least its share; UserSlots.borrow), summed.
   */
  userSlotsAlone: number;
  /** Superuser access to the database the service runs statements in (for set-up and checks). */
  databaseUrl: string;
  defaultDatabase: string;
  /** The control login of DATABASE_URL: it creates login roles; user roles are granted to it. */
  controlRole: string;
  /** Role the admin's statements run as. */
  adminRole: string;
  /** The single Redis node (REDIS_URL) of the default run; see `redisEnv` for the others. */
  redisUrl: string;
  /** The Redis deployment the suite's processes use (SLUICE_E2E_REDIS). */
  redisKind: 'single' | 'cluster' | 'sentinel';
  /** The environment that points a Sluice process at it (REDIS_URL, or Cluster/Sentinel nodes). */
  redisEnv: Record<string, string>;
  keyPrefix: string;
  jwtSecret: string;
  adminUser: string;
  adminPassword: string;
  /** The database settings of the suite's own processes (DATABASE_URL, credential key, …). */
  serviceEnv: Record<string, string>;
  /** SLUICE_PG_MAX_CONNECTIONS of every process that runs statements. */
  pgMaxConnections: number;
  /** SLUICE_SLOT_LEASE_MS of the suite's own processes. */
  slotLeaseMs: number;
  /** /metrics of each process that runs statements (workers; the api in standalone mode). */
  poolMetricsUrls: string[];
  /** Files that collect what the suite's own processes print. */
  logFiles?: string[];
  /** The local PostgreSQL, set up for deployments that specs start of their own. */
  local: ServiceDatabase;
  /**
   * Where kept results' bodies go (SLUICE_E2E_SPOOL): `redis` (no spool: cluster's default),
   * `file` (a directory: standalone's default) or `s3` (s3rver, started by the setup).
   */
  spool: 'redis' | 'file' | 's3';
  /** The environment that points a Sluice process at the spool (empty: none, or the default). */
  spoolEnv: Record<string, string>;
  /** The S3-compatible server of an `s3` spool. */
  s3?: { endpoint: string; bucket: string; prefix: string };
}

export { freePort };

export const ROOT = join(__dirname, '..', '..', '..');

/**
 * The built `sluice` binary (package.json's bin), as `npx sluice` runs it from a checkout. Specs run
 * it with node themselves: npx costs seconds of CPU a call before the binary starts.
 */
export const SLUICE_BIN = join(
  ROOT,
  (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: { sluice: string } }).bin
    .sluice,
);

export function randomName(prefix: string): string {
  return `${prefix}_${randomBytes(4).toString('hex')}`;
}

/** A started api or worker process and what it printed. */
export interface ServiceProcess {
  child: ChildProcess;
  output: () => string;
  stop: (signal?: NodeJS.Signals) => Promise<number | null>;
}

/** Starts `node dist/apps/<app>/src/main.js` with the given environment. */
export function startProcess(app: 'api' | 'worker', env: Record<string, string>): ServiceProcess {
  // SLUICE_E2E_DIST: run a build other than dist/ (e.g. while dist/ is being rebuilt).
  const dist = process.env.SLUICE_E2E_DIST ?? join(ROOT, 'dist');
  const child = spawn(process.execPath, [join(dist, 'apps', app, 'src', 'main.js')], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  return {
    child,
    output: () => output,
    stop: async (signal: NodeJS.Signals = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/**
 * True once a worker process has started (its last start-up line), not merely its pools (whose
 * lines say "threads ready" too).
 */
export function workerStarted(proc: ServiceProcess): boolean {
  return proc.output().includes('"msg":"ready"');
}

/** Polls GET /v1/info until it answers 200. */
export async function waitForApi(
  baseUrl: string,
  proc: ServiceProcess,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (proc.child.exitCode !== null) {
      throw new Error(`api exited with ${proc.child.exitCode}:\n${proc.output()}`);
    }
    try {
      const res = await fetch(`${baseUrl}/v1/info`);
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`api did not become ready:\n${proc.output()}`);
}

/** Runs a process to completion and returns its exit code and output (for start-up failures). */
export async function runToExit(
  app: 'api' | 'worker',
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  const proc = startProcess(app, env);
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), 20_000);
  const [code] = (await once(proc.child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, output: proc.output() };
}
