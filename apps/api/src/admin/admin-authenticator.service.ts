import { Injectable } from '@nestjs/common';
import { parse } from 'basic-auth';
import type { FastifyRequest } from 'fastify';
import { SluiceError } from '@app/contracts';
import { AuthUser } from '../auth/auth-user';
import { ADMIN_AUDIENCE, AuthService } from '../auth/auth.service';
import { TokenVerifier } from '../auth/token.verifier';
import { crossSiteRequestOf, foreignOriginRefusal } from '../http/cross-site.check';
import { authorizationProblem } from '../http/request.checks';
import { adminCookieOf } from './admin.cookie';

/**
 * The challenge of every 401 under /admin: a scheme no browser prompts for. Never Basic: a browser
 * that took one up would send the password with every later request to the whole origin.
 */
export const ADMIN_CHALLENGE = { 'WWW-Authenticate': 'Bearer realm="sluice admin"' };

/** A 401 from anywhere below, with the admin area's challenge instead of its own. */
export function withAdminChallenge(err: unknown): unknown {
  if (!(err instanceof SluiceError) || err.http !== 401) return err;
  return new SluiceError(err.code, err.message, err.sqlState, ADMIN_CHALLENGE);
}

/**
 * Who is making a request under /admin, outside Nest's guards too (for Fastify plugins such as the
 * queue dashboard). Browsers sign in on the admin page and send its cookie (`sluice_admin`, a
 * short-lived token good under /admin only); other clients may send the api's Bearer token or
 * Basic password instead. Never both, and the admin flag is the one stored now.
 */
@Injectable()
export class AdminAuthenticatorService {
  constructor(
    private readonly auth: AuthService,
    private readonly tokens: TokenVerifier,
  ) {}

  /** The administrator making the request; throws the catalogue's 400, 401 or 403 otherwise. */
  async admin(request: FastifyRequest): Promise<AuthUser> {
    const user = await this.user(request);
    if (!user.isAdmin) throw new SluiceError('FORBIDDEN', 'only administrators may do this');
    return user;
  }

  /** The signed-in user (administrator or not); 401s challenge with ADMIN_CHALLENGE. */
  async user(request: FastifyRequest): Promise<AuthUser> {
    try {
      return await this.credentialsOf(request);
    } catch (err) {
      throw withAdminChallenge(err);
    }
  }

  /**
   * The user of the request's admin cookie, or undefined when it has none that is valid now:
   * signing out must work with an expired or revoked cookie too.
   */
  async cookieUser(request: FastifyRequest): Promise<AuthUser | undefined> {
    const cookie = adminCookieOf(request.headers.cookie);
    if (cookie === undefined) return undefined;
    // A cookie that cannot be checked (expired, revoked, the store away) signs nobody in: the
    // page answers as to a visitor, who signs in again.
    return this.fromCookie(cookie, request).catch(() => undefined);
  }

  private credentialsOf(request: FastifyRequest): Promise<AuthUser> {
    const cookie = adminCookieOf(request.headers.cookie);
    const header = request.headers.authorization;
    if (cookie !== undefined && header) {
      throw new SluiceError(
        'INVALID_REQUEST',
        'ambiguous request: both the admin sign-in cookie and an Authorization header; send one',
      );
    }
    if (cookie !== undefined) return this.fromCookie(cookie, request);
    if (header) return this.fromHeader(header, request.ip);
    throw new SluiceError('AUTH_REQUIRED', 'not signed in: sign in on /admin');
  }

  private async fromCookie(token: string, request: FastifyRequest): Promise<AuthUser> {
    // SameSite=Strict keeps browsers from sending it cross-site; this refuses whoever does anyway,
    // on reads too: the cookie is a browser's credential, used by this service's own pages only.
    const refusal = foreignOriginRefusal(
      crossSiteRequestOf(request),
      'cross-site requests may not use the admin sign-in',
    );
    if (refusal !== undefined) throw new SluiceError('CROSS_SITE', refusal);
    const claims = await this.tokens.verify(token, ADMIN_AUDIENCE);
    return this.auth.userFromClaims(claims, 'admin-cookie');
  }

  private async fromHeader(header: string, address: string): Promise<AuthUser> {
    const problem = authorizationProblem(header);
    if (problem) throw new SluiceError('INVALID_REQUEST', problem);
    const space = header.indexOf(' ');
    const scheme = (space < 0 ? header : header.slice(0, space)).toLowerCase();
    const value = space < 0 ? '' : header.slice(space + 1).trim();
    if (scheme === 'bearer') return this.bearer(value);
    if (scheme === 'basic') return this.basic(header, address);
    throw new SluiceError('AUTH_REQUIRED', 'unsupported authorization scheme');
  }

  private async bearer(token: string): Promise<AuthUser> {
    return this.auth.userFromClaims(await this.tokens.verify(token));
  }

  private basic(header: string, address: string): Promise<AuthUser> {
    const credentials = parse(header);
    if (!credentials) {
      throw new SluiceError('BAD_CREDENTIALS', 'invalid username or password');
    }
    return this.auth.userFromPassword(credentials.name, credentials.pass, address);
  }
}
