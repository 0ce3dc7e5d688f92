import type { Client } from 'pg';

/**
 * The authentication requests by which PostgreSQL asks a client for its password (cleartext,
 * MD5, SASL/SCRAM), as pg's Connection names the messages it emits. A server whose pg_hba.conf
 * trusts the connection (or checks something else: peer, cert) sends AuthenticationOk at once.
 */
const PASSWORD_REQUESTS = [
  'authenticationCleartextPassword',
  'authenticationMD5Password',
  'authenticationSASL',
] as const;

/**
 * Watches a client that has not connected yet: the function returned says whether the server
 * asked it for a password before it let it in. pg offers no such answer of its own; this reads
 * the protocol messages its Connection emits (password.request.spec fails if they change).
 */
export function watchPasswordRequest(client: Client): () => boolean {
  let asked = false;
  const connection = (client as unknown as { connection?: NodeJS.EventEmitter }).connection;
  if (!connection || typeof connection.once !== 'function') {
    throw new Error('pg.Client has no connection to watch: see password.request.ts');
  }
  for (const name of PASSWORD_REQUESTS) connection.once(name, () => (asked = true));
  return () => asked;
}

/**
 * The ways of authentication (the method part of PostgreSQL 16's `system_user`) in which the
 * server checked a password the client sent: anything else (trust gives NULL; peer, ident, cert,
 * gss, sspi) checked no password.
 */
const PASSWORD_METHODS: ReadonlySet<string> = new Set([
  'scram-sha-256',
  'md5',
  'password',
  'ldap',
  'radius',
  'pam',
  'bsd',
]);

/** Whether `system_user` (`method:identity`, or null) says the session's password was checked. */
export function passwordChecked(systemUser: string | null): boolean {
  if (systemUser === null) return false;
  const colon = systemUser.indexOf(':');
  return colon > 0 && PASSWORD_METHODS.has(systemUser.slice(0, colon));
}
