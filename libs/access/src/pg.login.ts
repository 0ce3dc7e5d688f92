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
