/** The authenticated caller of a request, as guards attach it. */
export interface AuthUser {
  username: string;
  role: string;
  isAdmin: boolean;
  readOnly: boolean;
  /** Default database from the token, if it names one. */
  database?: string;
}
