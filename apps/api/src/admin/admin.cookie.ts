import { SluiceError } from '@app/contracts';

/** The admin pages' sign-in cookie. */
export const ADMIN_COOKIE = 'sluice_admin';

/** Browsers send it under /admin only: never with the api's own calls. */
export const ADMIN_COOKIE_PATH = '/admin';

/** What a signed token may hold: base64url parts and dots. */
const TOKEN = /^[A-Za-z0-9_\-.]+$/;

function attributes(maxAgeSeconds: number, { secure }: { secure: boolean }): string {
  // HttpOnly: no script reads it; SameSite=Strict: no other site's page makes a browser send it.
  const parts = [`Path=${ADMIN_COOKIE_PATH}`, `Max-Age=${maxAgeSeconds}`, 'HttpOnly'];
  parts.push('SameSite=Strict');
  if (secure) parts.push('Secure');
  return parts.join('; ');
}

/** `Set-Cookie` value that signs the browser in for `maxAgeSeconds`. */
export function adminCookie(
  token: string,
  maxAgeSeconds: number,
  transport: { secure: boolean },
): string {
  if (!TOKEN.test(token)) throw new Error('an admin cookie holds a signed token only');
  return `${ADMIN_COOKIE}=${token}; ${attributes(maxAgeSeconds, transport)}`;
}

/** `Set-Cookie` value that signs the browser out (the same name, path and flags, no life left). */
export function clearedAdminCookie(transport: { secure: boolean }): string {
  return `${ADMIN_COOKIE}=; ${attributes(0, transport)}`;
}

/**
 * The admin cookie's value in a `Cookie` header (Node joins several with `; `), or undefined when
 * it is not there. Sent twice (a cookie set for another path or by a sibling domain beside ours)
 * it is ambiguous, and refused with 400 rather than one of them picked.
 */
export function adminCookieOf(header: string | undefined): string | undefined {
  if (!header) return undefined;
  let found: string | undefined;
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=');
    if (eq < 0 || pair.slice(0, eq).trim() !== ADMIN_COOKIE) continue;
    if (found !== undefined) {
      throw new SluiceError(
        'INVALID_REQUEST',
        `ambiguous request: the ${ADMIN_COOKIE} cookie was sent more than once`,
      );
    }
    found = pair
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1');
  }
  // `sluice_admin=` is a cookie being cleared: nobody signed in.
  return found === '' ? undefined : found;
}
