/** The exit codes of `sluice`, as docs/cli.md lists them. */
export const EXIT_CODES = {
  ok: 0,
  /** The statement or the service failed (the message has the reason, SQLSTATE, query id). */
  failed: 1,
  /** The command line is wrong. */
  usage: 2,
  /** Not logged in, or the credentials or token were refused (401). */
  auth: 3,
  /** Worth retrying: the service could not be reached, or was busy (429, 503). */
  unavailable: 4,
  /** Interrupted (Ctrl-C): the query was cancelled on the server. */
  interrupted: 130,
} as const;
