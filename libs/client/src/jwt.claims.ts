/**
 * When a JWT expires (`exp`, in ms since the epoch), read without verifying it: the client only
 * needs to know when to refresh; the server checks the signature. Undefined if it has no `exp`.
 */
export function tokenExpiry(token: string): number | undefined {
  const payload = token.split('.')[1];
  if (!payload) return undefined;
  try {
    const base64 = payload.replace(/-/g, '+').replace(/_/g, '/');
    const padded = base64 + '='.repeat((4 - (base64.length % 4)) % 4);
    const claims = JSON.parse(atob(padded)) as { exp?: unknown };
    return typeof claims.exp === 'number' ? claims.exp * 1000 : undefined;
  } catch {
    // Not a JWT the client can read: it is sent as is and never refreshed ahead of time.
    return undefined;
  }
}
