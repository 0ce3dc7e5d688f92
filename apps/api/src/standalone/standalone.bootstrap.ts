import { SluiceConfig, isStandalone } from '@app/config';
import { ADMIN_ROLE, EmbeddedDatabase } from './embedded.database';
import { loadStandaloneState } from './standalone.state';

/** Settings completed for standalone mode, and the embedded database if one was started. */
export interface PreparedSettings {
  config: SluiceConfig;
  embedded?: EmbeddedDatabase;
  /** True when the admin password was generated (printed at start-up). */
  generatedPassword: boolean;
}

/**
 * Without REDIS_URL the api runs standalone: it fills in what cluster mode must be told (JWT secret,
 * admin) from a state file in the data directory, and without DATABASE_URL starts an embedded
 * PostgreSQL with a demo database.
 */
export async function prepareStandalone(config: SluiceConfig): Promise<PreparedSettings> {
  if (!isStandalone(config)) return { config, generatedPassword: false };
  const state = loadStandaloneState(config.dataDir);
  const next: SluiceConfig = { ...config };
  let embedded: EmbeddedDatabase | undefined;
  if (!config.databaseUrl) {
    embedded = new EmbeddedDatabase(config.dataDir, config.embeddedPgPort, state);
    const urls = await embedded.start();
    next.databaseUrl = urls.databaseUrl;
    next.metadataDatabaseUrl = urls.metadataDatabaseUrl;
    next.adminRole ??= ADMIN_ROLE;
  }
  next.jwtSecret ??= state.jwtSecret;
  next.credentialKey ??= state.credentialKey;
  next.adminUser ??= 'admin';
  const generatedPassword = next.adminPassword === undefined;
  next.adminPassword ??= state.adminPassword;
  return { config: next, embedded, generatedPassword };
}

/** What `npm start` prints: where it serves, how to log in, and queries to paste (sluice, curl). */
export function banner(prepared: PreparedSettings, url: string): string {
  const { config, embedded, generatedPassword } = prepared;
  // A password the operator chose is never echoed: only one generated here is shown.
  const login = generatedPassword
    ? JSON.stringify({ username: config.adminUser, password: config.adminPassword })
    : `{"username":${JSON.stringify(config.adminUser)},"password":"'"$SLUICE_ADMIN_PASSWORD"'"}`;
  const shownPassword = generatedPassword
    ? `${config.adminPassword}  (generated, kept in ${config.dataDir}/standalone.json)`
    : '(as set in SLUICE_ADMIN_PASSWORD)';
  const statement = embedded
    ? 'select name, country, population from demo.cities order by population desc limit 5'
    : 'select * from generate_series(1, 10) g';
  return [
    '',
    `Sluice is serving on ${url}  (standalone: in-process queue${embedded ? ', embedded PostgreSQL' : ''})`,
    `  admin user: ${config.adminUser}   password: ${shownPassword}`,
    '',
    '  Try it with the sluice command (login asks for the password, or reads it piped on stdin):',
    `    npx sluice login --url ${url} --user ${config.adminUser}`,
    `    npx sluice query "${statement}"`,
    '',
    '  Or with curl:',
    `    ${loginLine(url, login)}`,
    `    curl -s ${url}/v1/execute -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' -d '{"statement":"${statement}"}'`,
    '',
    `  In a browser: ${url}/admin (the queries, for the admin user), ${url}/docs (the API)`,
    '',
  ].join('\n');
}

/**
 * The curl line that logs in and keeps the token in TOKEN (POSIX shell, curl 7.76 or later). A
 * failed login prints curl's error and the answer's reason on stderr and exits non-zero: piped
 * straight into sed, the error JSON became the token and the next call's answer hid the cause.
 */
export function loginLine(url: string, login: string): string {
  return `TOKEN=$(curl -sS --fail-with-body ${url}/v1/login -H 'content-type: application/json' -d '${login}') && TOKEN=$(echo "$TOKEN" | sed -E 's/.*"access_token":"([^"]+)".*/\\1/') || { echo "login failed: $TOKEN" >&2; false; }`;
}

/**
 * What standalone mode prints when asked to stop: a shutdown waits up to the grace period for the
 * queries running, and said nothing while it did.
 */
export function stoppingLine(running: number): string {
  if (running === 0) return 'stopping…';
  return `stopping… (waiting for ${running} ${running === 1 ? 'query' : 'queries'})`;
}
