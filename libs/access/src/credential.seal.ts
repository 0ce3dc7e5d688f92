import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { purposeKey } from './credential.key';

/** Key purpose of sealed database-user credentials (see purposeKey). */
export const CREDENTIAL_SEAL_PURPOSE = 'database-user-credentials';

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEAD_BYTES = 1 + IV_BYTES + TAG_BYTES;

/**
 * What a sealed credential is bound to (AES-GCM additional data): a sealed password copied to
 * another session or user row does not open.
 */
export interface SealContext {
  sessionId: string;
  username: string;
}

/** The AES-256 key that seals database-user credentials, from SLUICE_CREDENTIAL_KEY. */
export function credentialSealKey(secret: string): Buffer {
  return purposeKey(secret, CREDENTIAL_SEAL_PURPOSE);
}

/** Length-prefixed, so that no two contexts give the same bytes. */
function additionalData(context: SealContext): Buffer {
  const parts = [context.sessionId, context.username].map((s) => Buffer.from(s, 'utf8'));
  const out = Buffer.alloc(parts.reduce((n, p) => n + 4 + p.length, 1));
  out.writeUInt8(VERSION, 0);
  let at = 1;
  for (const part of parts) {
    out.writeUInt32BE(part.length, at);
    part.copy(out, at + 4);
    at += 4 + part.length;
  }
  return out;
}

function requireKey(key: Buffer): void {
  if (key.length !== 32) throw new Error('a credential seal key is 32 bytes');
}

/** AES-256-GCM: version byte, 12-byte random IV, 16-byte tag, then the ciphertext. */
export function sealCredential(key: Buffer, password: string, context: SealContext): Buffer {
  requireKey(key);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(additionalData(context));
  const body = Buffer.concat([cipher.update(password, 'utf8'), cipher.final()]);
  return Buffer.concat([Buffer.of(VERSION), iv, cipher.getAuthTag(), body]);
}

/**
 * The password sealed for this context; throws when the bytes were changed, or were sealed for
 * another context or under another key.
 */
export function openCredential(key: Buffer, sealed: Buffer, context: SealContext): string {
  requireKey(key);
  if (sealed.length < HEAD_BYTES || sealed[0] !== VERSION) {
    throw new Error('not a sealed credential');
  }
  const iv = sealed.subarray(1, 1 + IV_BYTES);
  const tag = sealed.subarray(1 + IV_BYTES, HEAD_BYTES);
  const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(additionalData(context));
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(sealed.subarray(HEAD_BYTES)), decipher.final()]).toString(
    'utf8',
  );
}
