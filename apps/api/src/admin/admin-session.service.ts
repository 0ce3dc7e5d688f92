import { Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { okStatus } from '@app/contracts';
import { AdminSessionDto, AdminSignInDto, StatusResponseDto } from '@app/http-contracts';
import { AuthService } from '../auth/auth.service';
import { protocolOf } from '../http/cross-site.check';
import { AdminAuthenticatorService, withAdminChallenge } from './admin-authenticator.service';
import { adminCookie, clearedAdminCookie } from './admin.cookie';

/** A sign-in answer: what the page is told, and the Set-Cookie that carries the session. */
export interface AdminSignIn {
  session: AdminSessionDto;
  cookie: string;
}

/** Browsers drop a Secure cookie sent over http: only a request that came over https gets one. */
const secure = (request: FastifyRequest) => protocolOf(request) === 'https';

/**
 * The admin pages' sign-in: one password check, then a short-lived HttpOnly, SameSite=Strict
 * cookie scoped to /admin that both the query view and the queue dashboard take, so that no
 * password prompt is ever needed and no credential is held by the page's script.
 */
@Injectable()
export class AdminSessionService {
  constructor(
    private readonly auth: AuthService,
    private readonly authenticator: AdminAuthenticatorService,
  ) {}

  /** Checks the password like POST /v1/login (throttled alike), and makes the cookie. */
  async signIn(body: AdminSignInDto, request: FastifyRequest): Promise<AdminSignIn> {
    // A wrong password is 401 like at /v1/login, but with no Basic in its challenge.
    const signed = await this.auth.adminSession(body, request.ip).catch((err: unknown) => {
      throw withAdminChallenge(err);
    });
    return {
      session: {
        username: signed.username,
        admin: signed.isAdmin,
        expires_in: signed.expiresIn,
        status: okStatus(),
      },
      cookie: adminCookie(signed.token, signed.expiresIn, { secure: secure(request) }),
    };
  }

  /** Who the request is signed in as (401 otherwise), and for how much longer. */
  async current(request: FastifyRequest): Promise<AdminSessionDto> {
    const user = await this.authenticator.user(request);
    const left = user.token ? user.token.expiresAt - Math.floor(Date.now() / 1000) : 0;
    return {
      username: user.username,
      admin: user.isAdmin,
      expires_in: Math.max(0, left),
      status: okStatus(),
    };
  }

  /** The Set-Cookie that signs a browser out, whatever its cookie holds. */
  clearingCookie(request: FastifyRequest): string {
    return clearedAdminCookie({ secure: secure(request) });
  }

  /** Ends the cookie's session (its token revoked everywhere) when it still has one. */
  async signOut(request: FastifyRequest): Promise<StatusResponseDto> {
    const user = await this.authenticator.cookieUser(request);
    if (user) await this.auth.logout(user);
    return { status: okStatus('signed out') };
  }
}
