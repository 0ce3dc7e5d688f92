/** When a JWT was issued and when it expires (ms since the epoch), where it says. */
export interface TokenTimes {
  issuedAt?: number;
  expiresAt?: number;
}

/**
 * A JWT's `iat` and `exp`, read without verifying it: the client only needs to know when to
 * refresh; the server checks the signature. Empty for what is not a JWT.
 */
export function tokenTimes(token: string): TokenTimes {
  const payload = token.split('.')[1];
  if (!payload) return {};
  try {
    const base64 = payload.replace(/-/g, '+').replace(/_/g, '/');
    const padded = base64 + '='.repeat((4 - (base64.length % 4)) % 4);
    const claims = JSON.parse(atob(padded)) as { iat?: unknown; exp?: unknown };
    return {
      issuedAt: typeof claims.iat === 'number' ? claims.iat * 1000 : undefined,
      expiresAt: typeof claims.exp === 'number' ? claims.exp * 1000 : undefined,
    };
  } catch {
    // Not a JWT the client can read: it is sent as is and never refreshed ahead of time.
    return {};
  }
}
