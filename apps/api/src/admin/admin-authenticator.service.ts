import { Injectable } from '@nestjs/common';
import { JwtService } from '@nestjs/jwt';
import type { FastifyRequest } from 'fastify';
import { SluiceError } from '@app/contracts';
import { challenge, tokenRejection } from '../auth/auth.challenge';
import { AuthUser } from '../auth/auth-user';
import { AuthService, TokenClaims } from '../auth/auth.service';

/** A browser shows its password prompt only for a Basic challenge of its own. */
const BROWSER_CHALLENGE = { 'WWW-Authenticate': 'Basic realm="sluice admin", charset="UTF-8"' };

/**
 * Checks the credentials of a request outside Nest's guards (for Fastify plugins such as the queue
 * dashboard): the same Bearer tokens and Basic passwords as the rest of the api, and the admin flag
 * as stored now.
 */
@Injectable()
export class AdminAuthenticatorService {
  constructor(
    private readonly auth: AuthService,
    private readonly jwt: JwtService,
  ) {}

  /** The administrator making the request; throws the catalogue's 401 or 403 otherwise. */
  async admin(request: FastifyRequest): Promise<AuthUser> {
    const user = await this.user(request);
    if (!user.isAdmin) throw new SluiceError('FORBIDDEN', 'only administrators may do this');
    return user;
  }

  private async user(request: FastifyRequest): Promise<AuthUser> {
    const header = request.headers.authorization;
    if (typeof header !== 'string' || header === '') {
      throw new SluiceError(
        'AUTH_REQUIRED',
        'missing Authorization header',
        undefined,
        BROWSER_CHALLENGE,
      );
    }
    const space = header.indexOf(' ');
    const scheme = (space < 0 ? header : header.slice(0, space)).toLowerCase();
    const value = space < 0 ? '' : header.slice(space + 1).trim();
    if (scheme === 'bearer') return this.bearer(value);
    if (scheme === 'basic') return this.basic(value, request.ip);
    throw new SluiceError(
      'AUTH_REQUIRED',
      'unsupported authorization scheme',
      undefined,
      challenge(),
    );
  }

  private async bearer(token: string): Promise<AuthUser> {
    let claims: TokenClaims;
    try {
      claims = await this.jwt.verifyAsync<TokenClaims>(token, { algorithms: ['HS256'] });
    } catch (err) {
      throw tokenRejection(err);
    }
    return this.auth.userFromClaims(claims);
  }

  private async basic(encoded: string, address: string): Promise<AuthUser> {
    const decoded = Buffer.from(encoded, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) {
      throw new SluiceError(
        'BAD_CREDENTIALS',
        'invalid username or password',
        undefined,
        BROWSER_CHALLENGE,
      );
    }
    try {
      return await this.auth.userFromPassword(
        decoded.slice(0, colon),
        decoded.slice(colon + 1),
        address,
      );
    } catch (err) {
      // Let a browser ask again after a wrong password.
      if (err instanceof SluiceError && err.code === 'BAD_CREDENTIALS') {
        throw new SluiceError('BAD_CREDENTIALS', err.message, undefined, BROWSER_CHALLENGE);
      }
      throw err;
    }
  }
}
