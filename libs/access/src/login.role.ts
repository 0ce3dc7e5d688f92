import { createHmac, pbkdf2Sync, randomBytes, createHash } from 'node:crypto';
import { purposeKey } from './credential.key';
import { PgLogin } from './pg.login';

const NAME_BYTES = 63;
const SCRAM_ITERATIONS = 4096;

function mac(secret: string, purpose: string, text: string): Buffer {
  return createHmac('sha256', purposeKey(secret, purpose)).update(text).digest();
}

/** Cuts a string to at most `bytes` UTF-8 bytes without splitting a character. */
function cutBytes(text: string, bytes: number): string {
  let out = '';
  let used = 0;
  for (const ch of text) {
    const n = Buffer.byteLength(ch);
    if (used + n > bytes) break;
    out += ch;
    used += n;
  }
  return out;
}

/**
 * Name of the login role Sluice keeps for user role `role`: readable, unique per role (the mac
 * covers the whole name, however the tail is cut) and per deployment (it depends on the key).
 */
export function loginRoleName(role: string, secret: string): string {
  const tag = mac(secret, 'login-role-names', role).toString('hex').slice(0, 10);
  return cutBytes(`sluice_${tag}_${role}`, NAME_BYTES);
}

/** The tag of a login role's name (`sluice_<tag>_…`): ten hex digits of a MAC under some key. */
const TAGGED_NAME = /^sluice_([0-9a-f]{10})_/;

/**
 * Whether `name` is what loginRoleName gives for `role` under some key, not necessarily this
 * deployment's: the tag alone depends on the key, so a login role made under an earlier key still
 * has this form, and its user role's name (cut as loginRoleName cuts it) after the tag.
 */
export function isLoginRoleNameFor(name: string, role: string): boolean {
  const tagged = TAGGED_NAME.exec(name);
  return tagged !== null && name === cutBytes(`sluice_${tagged[1]}_${role}`, NAME_BYTES);
}

/** Its password: derived, so that every worker thread knows it without asking anything. */
export function loginRolePassword(role: string, secret: string): string {
  return mac(secret, 'login-role-passwords', role).toString('base64url');
}

/** The login a service user's statements run over. */
export function serviceLogin(role: string, secret: string): PgLogin {
  return { user: loginRoleName(role, secret), password: loginRolePassword(role, secret) };
}

/**
 * A SCRAM-SHA-256 verifier for PASSWORD '…' (RFC 5802, as PostgreSQL stores it), so that the
 * password itself never appears in a statement the server may log.
 */
export function scramVerifier(password: string, salt: Buffer = randomBytes(16)): string {
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, SCRAM_ITERATIONS, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  const b64 = (b: Buffer) => b.toString('base64');
  return `SCRAM-SHA-256$${SCRAM_ITERATIONS}:${b64(salt)}$${b64(storedKey)}:${b64(serverKey)}`;
}
