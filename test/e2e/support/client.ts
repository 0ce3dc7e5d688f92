import { createHmac, hkdfSync } from 'node:crypto';
import { Pool } from 'pg';
import { E2eEnvironment } from './service';
import { until } from '../../support/poll';

export { until };

export function e2eEnv(): E2eEnvironment {
  const raw = process.env.SLUICE_E2E;
  if (!raw)
    throw new Error('SLUICE_E2E is not set: run through jest (global-setup starts the service)');
  return JSON.parse(raw) as E2eEnvironment;
}

/** A response read whole. */
export interface HttpResult {
  status: number;
  headers: Headers;
  text: string;

  json: any;
}

export interface RequestOptions {
  /** One api in particular; default: the next one, round robin. */
  baseUrl?: string;
  method?: string;
  path?: string;
  token?: string;
  headers?: Record<string, string>;
  /** Sent as is instead of JSON.stringify(body). */
  raw?: string | Buffer;
}

let turn = 0;

/** The next api, round robin: requests are spread over every api process. */
export function nextBaseUrl(): string {
  const { baseUrls } = e2eEnv();
  turn = (turn + 1) % baseUrls.length;
  return baseUrls[turn];
}

export async function request(body: unknown, options: RequestOptions = {}): Promise<HttpResult> {
  const baseUrl = options.baseUrl ?? nextBaseUrl();
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const method = options.method ?? 'POST';
  let payload: string | Buffer | undefined;
  if (method !== 'GET' && (body !== undefined || options.raw !== undefined)) {
    payload = options.raw ?? JSON.stringify(body);
    if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
      headers['content-type'] = 'application/json';
    }
  }
  const res = await fetch(`${baseUrl}${options.path ?? '/v1/execute'}`, {
    method,
    headers,
    body: payload,
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

const tokens = new Map<string, string>();

/** Logs in (once per user per test file) and returns the access token. */
export async function login(username?: string, password?: string): Promise<string> {
  const env = e2eEnv();
  const user = username ?? env.adminUser;
  const key = `${user}\n${password ?? ''}`;
  const cached = tokens.get(key);
  if (cached) return cached;
  const res = await request(
    { username: user, password: password ?? env.adminPassword },
    { path: '/v1/login' },
  );
  if (res.status !== 200) throw new Error(`login failed: ${res.status} ${res.text}`);
  const token = res.json.access_token as string;
  tokens.set(key, token);
  return token;
}

/** POST /v1/execute as the admin (or with the given token). */
export async function execute(body: unknown, options: RequestOptions = {}): Promise<HttpResult> {
  return request(body, { token: options.token ?? (await login()), ...options });
}

let pool: Pool | undefined;

/** Direct access to the test database, for setting up objects and checking what it holds. */
export function db(): Pool {
  pool ??= new Pool({ connectionString: e2eEnv().databaseUrl, max: 2 });
  return pool;
}

/** Lets the admin's role use a schema the test created as superuser (a no-op for superusers). */
export async function grantSchema(schema: string): Promise<void> {
  const role = e2eEnv().adminRole;
  await db().query(`GRANT ALL ON SCHEMA ${schema} TO ${role}`);
  await db().query(`GRANT ALL ON ALL TABLES IN SCHEMA ${schema} TO ${role}`);
}

export async function closeDb(): Promise<void> {
  await pool?.end();
  pool = undefined;
}

export const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Adds a user straight into Sluice's table (mapped to the admin's role) and logs in as it. */
export async function createUser(prefix: string): Promise<{ username: string; token: string }> {
  const { hashPassword } = await import('@app/users');
  const username = `${prefix}_${Math.random().toString(16).slice(2, 10)}`;
  const password = `pw-${username}`;
  await db().query('INSERT INTO sluice.users (username, password_hash, role) VALUES ($1, $2, $3)', [
    username,
    await hashPassword(password),
    e2eEnv().adminRole,
  ]);
  return { username, token: await login(username, password) };
}

/**
 * Fresh users enough to hold every slot of the deployment between them (one user's queries hold
 * at most `userSlots` at once), and the one to send the i-th of `capacity` statements as.
 */
export async function slotFillers(
  prefix: string,
): Promise<{ users: { username: string; token: string }[]; tokenFor(i: number): string }> {
  const { capacity, userSlots } = e2eEnv();
  const users: { username: string; token: string }[] = [];
  for (let i = 0; i < Math.ceil(capacity / userSlots); i++) users.push(await createUser(prefix));
  return { users, tokenFor: (i) => users[Math.floor(i / userSlots)].token };
}

/** A lock a test holds in PostgreSQL, that statements of the test's may wait on. */
export interface HeldLock {
  /** A call to put in a statement (`select 1 from ${waitOn}`): it waits until the release. */
  waitOn: string;
  release(): Promise<void>;
}

/**
 * Takes a lock in PostgreSQL that statements wait on until `release()`: they run for as long as
 * the test needs them running, however slow the machine, and not a fixed time longer.
 */
export async function holdLock(): Promise<HeldLock> {
  const key = Math.floor(Math.random() * 2 ** 31);
  const holder = await db().connect();
  await holder.query('select pg_advisory_lock($1)', [key]);
  let held = true;
  return {
    waitOn: `pg_advisory_xact_lock_shared(${key})`,
    release: async () => {
      if (!held) return;
      held = false;
      try {
        await holder.query('select pg_advisory_unlock($1)', [key]);
      } finally {
        holder.release();
      }
    },
  };
}

export async function dropUser(username: string): Promise<void> {
  await db().query('DELETE FROM sluice.users WHERE username = $1', [username]);
}

/**
 * The names of the users a spec makes, deleted after all its tests, and the database pool closed.
 * Call it at the top of a spec file.
 */
export function usersDroppedAfterAll(): string[] {
  const users: string[] = [];
  afterAll(async () => {
    for (const name of users) await dropUser(name);
    await closeDb();
  });
  return users;
}

/** Polls until `check` returns a value (not undefined), or fails after `ms`. */
export async function eventually<T>(check: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * The application_name a query's statement runs under, in a deployment of credential key `key` (by
 * default the suite's own), derived as docs/architecture.md says (not imported from the lib: the
 * global set-up and teardown load this file without the @app paths).
 */
export function applicationNameOf(
  queryId: string,
  key = e2eEnv().serviceEnv.SLUICE_CREDENTIAL_KEY,
): string {
  const derived = Buffer.from(hkdfSync('sha256', key, 'sluice', 'statement-application-names', 32));
  const tag = createHmac('sha256', derived).update(queryId).digest().subarray(0, 18);
  return `sluice:${tag.toString('base64url')}`;
}

/** Backends running a query of Sluice's (see applicationNameOf). */
export async function backendsOf(queryId: string): Promise<number> {
  const { rows } = await db().query<{ n: number }>(
    'select count(*)::int as n from pg_stat_activity where application_name = $1',
    [applicationNameOf(queryId)],
  );
  return rows[0].n;
}
