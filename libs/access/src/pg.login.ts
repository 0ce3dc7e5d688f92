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
