import { KeyObject, createSecretKey } from 'node:crypto';

/**
 * The HS256 key as a KeyObject: given a string, jsonwebtoken first tries it as a public key
 * (which throws) on every verify — 350 µs against 7 µs measured here.
 */
export function jwtKey(secret: string): KeyObject {
  return createSecretKey(Buffer.from(secret, 'utf8'));
}
