import { hkdfSync } from 'node:crypto';

/**
 * A 32-byte key for one purpose, derived from SLUICE_CREDENTIAL_KEY (HKDF-SHA256), so that the
 * login-role passwords and the sealed database-user credentials never share a key.
 */
export function purposeKey(secret: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'sluice', purpose, 32));
}
