import { spawn } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { loginRoleName } from '@app/access';
import { HttpResult, closeDb, db, e2eEnv, login, request } from './client';
import { dropRoleAndLogins, grantToControl } from './roles';
import { ROOT, SLUICE_BIN, randomName } from './service';

/** A user made through POST /v1/users, with its password and (after first use) a token. */
export interface TestUser {
  username: string;
  password: string;
  role: string;
}

/** A TestUser with the token of a login of its own. */
export interface LoggedInUser extends TestUser {
  token: string;
}

/** A NOLOGIN role the control login may grant (as the README's set-up asks). */
export async function createRole(prefix = 'e2e_role'): Promise<string> {
  const role = randomName(prefix);
  await db().query(`CREATE ROLE ${role} NOLOGIN`);
  const client = await db().connect();
  try {
    await grantToControl(client, role, e2eEnv().controlRole);
  } finally {
    client.release();
  }
  return role;
}

/** Drops a role, its login roles, and whatever they owned or were granted in the test database. */
export async function dropRole(role: string): Promise<void> {
  const client = await db().connect();
  try {
    await dropRoleAndLogins(client, role);
  } finally {
    client.release();
  }
}

/**
 * The login role the suite's own processes keep for `role`. Not any `sluice_<tag>_<role>`: every
 * Sluice api that starts on the same metadata database (another pass of the suite, a spec's own
 * deployment, another checkout's run) makes one for each user's role under its own key.
 */
export function loginRoleOf(role: string): string {
  return loginRoleName(role, e2eEnv().serviceEnv.SLUICE_CREDENTIAL_KEY);
}

/**
 * Calls the user-management api as the suite's admin, on the api that executeAs and freshLogin
 * use by default: a change takes effect there at once, and on the other apis within moments
 * (they hear of it by PostgreSQL's NOTIFY), so a check right after a change goes to the same api.
 */
export async function adminCall(method: string, path: string, body?: unknown): Promise<HttpResult> {
  return request(body, { method, path, token: await login(), baseUrl: e2eEnv().baseUrl });
}

/** Creates a user through the api (role made unless given); fails the test on any error. */
export async function createUser(
  options: { role?: string; admin?: boolean; read_only?: boolean; prefix?: string } = {},
): Promise<TestUser> {
  const role = options.role ?? (await createRole());
  const user = {
    username: randomName(options.prefix ?? 'e2e_user'),
    password: randomBytes(12).toString('base64url'),
    role,
  };
  const res = await adminCall('POST', '/v1/users', {
    ...user,
    admin: options.admin,
    read_only: options.read_only,
  });
  if (res.status !== 201) throw new Error(`could not create a user: ${res.status} ${res.text}`);
  return user;
}

/** Logs in without the client's token cache (every call is a real login). */
export async function freshLogin(
  username: string,
  password: string,
  extra: Record<string, unknown> = {},
  baseUrl = e2eEnv().baseUrl,
): Promise<HttpResult> {
  return call(baseUrl, 'POST', '/v1/login', { username, password, ...extra });
}

/** Logs in afresh (see freshLogin) and returns the access token; fails the test on any error. */
export async function freshToken(
  username: string,
  password: string,
  baseUrl = e2eEnv().baseUrl,
): Promise<string> {
  const res = await freshLogin(username, password, {}, baseUrl);
  if (res.status !== 200) throw new Error(`could not log in: ${res.status} ${res.text}`);
  return res.json.access_token as string;
}

/** The users and roles a spec makes, to be dropped after all its tests. */
export interface MadeForSpec {
  users: string[];
  roles: string[];
}

/**
 * Drops after all of a spec's tests the users and roles it lists in the answer (each role with
 * its login roles), and `schemas` in between, then closes the database pool. Call it at the top
 * of a spec file.
 */
export function usersAndRolesDroppedAfterAll(schemas: string[] = []): MadeForSpec {
  const made: MadeForSpec = { users: [], roles: [] };
  afterAll(async () => {
    await db().query('DELETE FROM sluice.users WHERE username = ANY($1)', [made.users]);
    for (const schema of schemas) await db().query(`DROP SCHEMA ${schema} CASCADE`);
    for (const role of made.roles) await dropRole(role);
    await closeDb();
  });
  return made;
}

/**
 * createUser (a role made for it unless given), logged in afresh: the user, and the role if made
 * here, are listed in `made` to be dropped after all tests.
 */
export async function createLoggedInUser(
  made: MadeForSpec,
  options: Parameters<typeof createUser>[0] = {},
): Promise<LoggedInUser> {
  const user = await createUser(options);
  if (options.role === undefined) made.roles.push(user.role);
  made.users.push(user.username);
  return { ...user, token: await freshToken(user.username, user.password) };
}

/** POST /v1/execute as a user's Bearer token, on any api. */
export function executeAs(
  token: string,
  body: unknown,
  baseUrl = e2eEnv().baseUrl,
  path = '/v1/execute',
): Promise<HttpResult> {
  return call(baseUrl, 'POST', path, body, { authorization: `Bearer ${token}` });
}

/** Any request to any api, the body as JSON. */
export async function call(
  baseUrl: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<HttpResult> {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
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

/** `Authorization: Basic` for a user name and password. */
export function basic(username: string, password: string): Record<string, string> {
  return { authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}` };
}

/** An HS256 JWT over any claims and header, signed with any key (or unsigned for alg none). */
export function signToken(
  claims: Record<string, unknown>,
  secret: string,
  header: Record<string, unknown> = { alg: 'HS256', typ: 'JWT' },
): string {
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const head = enc(header);
  const body = enc(claims);
  const sig =
    header.alg === 'none'
      ? ''
      : createHmac(header.alg === 'HS512' ? 'sha512' : 'sha256', secret)
          .update(`${head}.${body}`)
          .digest('base64url');
  return `${head}.${body}.${sig}`;
}

/** The claims of a token (not verified). */
export function claimsOf(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()) as Record<
    string,
    unknown
  >;
}

/** Asserts an error answer: the status envelope, nothing else, no stack trace. */
export function expectEnvelope(res: HttpResult, sqlState?: string, vendorCode?: number): void {
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.json).toEqual(
    expect.objectContaining({
      status: {
        reason: expect.any(String),
        sql_state: sqlState ?? expect.stringMatching(/^[0-9A-Z]{5}$/),
        vendor_code: vendorCode ?? expect.any(Number),
      },
    }),
  );
  expect(Object.keys(res.json as object).every((k) => k === 'status' || k === 'query_id')).toBe(
    true,
  );
  expect(res.text).not.toMatch(/at .*\.(js|ts):\d+/);
}

/** `sluice …` (the checkout's bin) against the suite's database, with `input` on stdin. */
export function cli(
  args: string[],
  input = '',
  override: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env = e2eEnv();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SLUICE_BIN, ...args], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        ...env.serviceEnv,
        ...override,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}
