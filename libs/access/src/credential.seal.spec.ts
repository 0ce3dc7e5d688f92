import { randomBytes } from 'node:crypto';
import { SealContext, credentialSealKey, openCredential, sealCredential } from './credential.seal';

describe(sealCredential.name, () => {
  const key = credentialSealKey('a-credential-key-of-at-least-32-characters');
  const context: SealContext = {
    sessionId: '0f6a2c1e-7b1d-4c3e-9a55-2d9c1e0b7a11',
    username: 'alice',
  };
  const password = 'correct horse battery staple ✓';

  it('opens what it sealed, for the same context', () => {
    const sealed = sealCredential(key, password, context);
    expect(openCredential(key, sealed, context)).toBe(password);
  });

  it('never holds the password in the clear, and seals the same password differently each time', () => {
    const a = sealCredential(key, password, context);
    const b = sealCredential(key, password, context);
    expect(a.includes(Buffer.from(password, 'utf8'))).toBe(false);
    expect(a.equals(b)).toBe(false);
  });

  it('fails when any byte of the sealed credential was changed', () => {
    const sealed = sealCredential(key, password, context);
    for (let i = 0; i < sealed.length; i++) {
      const tampered = Buffer.from(sealed);
      tampered[i] ^= 0x01;
      expect(() => openCredential(key, tampered, context)).toThrow();
    }
  });

  it('fails when the sealed credential was cut short', () => {
    const sealed = sealCredential(key, password, context);
    expect(() => openCredential(key, sealed.subarray(0, sealed.length - 1), context)).toThrow();
    expect(() => openCredential(key, sealed.subarray(0, 20), context)).toThrow();
  });

  it('fails for another session id or user name (the additional data)', () => {
    const sealed = sealCredential(key, password, context);
    expect(() =>
      openCredential(key, sealed, { ...context, sessionId: randomBytes(16).toString('hex') }),
    ).toThrow();
    expect(() => openCredential(key, sealed, { ...context, username: 'bob' })).toThrow();
  });

  it('does not confuse contexts whose concatenations are equal', () => {
    const sealed = sealCredential(key, password, { sessionId: 'ab', username: 'c' });
    expect(() => openCredential(key, sealed, { sessionId: 'a', username: 'bc' })).toThrow();
  });

  it('fails under another key', () => {
    const sealed = sealCredential(key, password, context);
    const other = credentialSealKey('another-credential-key-of-32-characters!');
    expect(() => openCredential(other, sealed, context)).toThrow();
  });

  it('derives a key of its own from the secret, not the secret itself', () => {
    const secret = 'a-credential-key-of-at-least-32-characters';
    expect(credentialSealKey(secret)).toHaveLength(32);
    expect(credentialSealKey(secret).equals(Buffer.from(secret).subarray(0, 32))).toBe(false);
  });

  it('refuses a key that is not 32 bytes', () => {
    expect(() => sealCredential(Buffer.alloc(16), password, context)).toThrow(/32 bytes/);
  });
});
