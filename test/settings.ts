import { Client, type ClientConfig } from 'pg';

/**
 * Where every test finds the local PostgreSQL and Redis — the e2e suite and the unit specs that
 * check their output against a real server alike. Override with E2E_DATABASE_URL / E2E_REDIS_URL.
 */
export const testDatabaseUrl =
  process.env.E2E_DATABASE_URL ?? 'postgresql://root@127.0.0.1:5432/test';
export const testRedisUrl = process.env.E2E_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * A connected client on the test database. It throws when the server cannot be reached, so that a
 * spec which needs PostgreSQL fails instead of passing without having checked anything.
 */
export async function connectTestDatabase(
  config: Omit<ClientConfig, 'connectionString'> = {},
): Promise<Client> {
  const client = new Client({
    connectionTimeoutMillis: 5_000,
    ...config,
    connectionString: testDatabaseUrl,
  });
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => undefined); // the connect error is the one worth reporting
    throw new Error(
      `PostgreSQL at ${redacted(testDatabaseUrl)} is not reachable (set E2E_DATABASE_URL): ${(err as Error).message}`,
      { cause: err },
    );
  }
  return client;
}

/** The URL without its password, for messages. */
function redacted(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(an unparsable URL)';
  }
}
