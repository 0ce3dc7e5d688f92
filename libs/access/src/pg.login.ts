/**
 * The PostgreSQL login a user's statements run over. Plain data (structured-clone safe): it is
 * handed to a pool thread with the task, never stored in job data, logs or metrics.
 */
export interface PgLogin {
  user: string;
  password: string;
  /**
   * A database user's own login: before every statement the runner checks that the role still
   * exists and may log in (a pooled connection outlives DROP ROLE, NOLOGIN and VALID UNTIL).
   */
  checkOnUse?: boolean;
  /**
   * With checkOnUse: the role may be (or become) a superuser or a member of SERVER_FILE_ROLES
   * (SLUICE_ALLOW_PRIVILEGED_DATABASE_USERS); otherwise such a role's statements are refused.
   */
  mayBePrivileged?: boolean;
}

/**
 * DATABASE_URL (host, port, TLS and other settings) for another database and, if given, another
 * login. pg decodes the path with decodeURI: database names holding / ? # and the like do not
 * come through (the login is refused as an unknown database, never another one).
 */
export function loginUrl(
  baseUrl: string,
  database: string | undefined,
  login?: Pick<PgLogin, 'user' | 'password'>,
): string {
  const url = new URL(baseUrl);
  if (database !== undefined) url.pathname = '/' + encodeURIComponent(database);
  if (login) {
    url.username = encodeURIComponent(login.user);
    url.password = encodeURIComponent(login.password);
  }
  return url.toString();
}

/**
 * Where Sluice's own logins (control, metadata) look for functions, operators and types. Users
 * may be able to create objects in `public` (PostgreSQL 14's default, or a grant) or in a schema
 * named after a login; one there that fits a call better than pg_catalog's — a
 * pg_advisory_xact_lock(integer), a numeric * integer — would run with that login's rights.
 */
export const OWN_SEARCH_PATH = 'search_path=pg_catalog,pg_temp';

/**
 * `url` for a connection of Sluice's own logins: its `options` (which pg would let override a
 * pool's own) followed by `options` and, last so that nothing before replaces it, OWN_SEARCH_PATH.
 */
export function ownLoginUrl(url: string, options = ''): string {
  const parsed = new URL(url);
  const all = [parsed.searchParams.get('options') ?? '', options, `-c ${OWN_SEARCH_PATH}`];
  parsed.searchParams.set('options', all.filter((o) => o !== '').join(' '));
  return parsed.toString();
}
