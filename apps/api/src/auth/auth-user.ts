/** The token a request came with (Bearer only). Times in seconds since the epoch. */
export interface PresentedToken {
  id: string;
  expiresAt: number;
  /** When the login that began this session happened (kept across refreshes). */
  authTime: number;
}

/** The authenticated caller of a request, as guards attach it. */
export interface AuthUser {
  username: string;
  /**
   * Service users: the id their user was created with; database users: their role's id at login
   * (`pg-role:<oid>`). What they own (queries, kept results, Idempotency-Keys) is theirs only
   * under it: a user or role re-created under the name is another.
   */
  userId?: string;
  role: string;
  isAdmin: boolean;
  readOnly: boolean;
  /** Default database from the token or the `user@database` login, if one was named. */
  database?: string;
  token?: PresentedToken;
  /** Database users: the id of the session that keeps their sealed credential. */
  session?: string;
}
