import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { AuthGuard } from '@nestjs/passport';
import type { FastifyRequest } from 'fastify';
import { SluiceError } from '@app/contracts';
import { authorizationProblem } from '../http/request.checks';
import { challenge } from './auth.challenge';
import { AuthUser } from './auth-user';
import { AuthService } from './auth.service';
import { TokenVerifier } from './token.verifier';
import { VerifiedTokens } from './verified.tokens';

@Injectable()
class PasswordGuard extends AuthGuard('basic') {
  override handleRequest<T>(err: unknown, user: T): T {
    if (user) return user;
    // A failure to check (e.g. the metadata database is down) is not a bad credential.
    if (err) throw err as Error;
    throw new SluiceError(
      'BAD_CREDENTIALS',
      'invalid username or password',
      undefined,
      challenge(),
    );
  }
}

/**
 * Accepts `Authorization: Bearer <token>` or `Basic <credentials>`; anything else is 401, and a
 * header holding more than one credential is 400 (the header checks refuse it first; this is the
 * guard's own line, for whatever route is mounted without them).
 */
@Injectable()
export class CredentialsGuard implements CanActivate {
  private readonly basic = new PasswordGuard();

  constructor(
    private readonly auth: AuthService,
    private readonly tokens: TokenVerifier,
    private readonly verified: VerifiedTokens,
  ) {}

  canActivate(context: ExecutionContext): Promise<boolean> | boolean {
    const request = context.switchToHttp().getRequest<FastifyRequest & { user?: unknown }>();
    const header = request.headers.authorization;
    const problem = typeof header === 'string' ? authorizationProblem(header) : undefined;
    if (problem) throw new SluiceError('INVALID_REQUEST', problem);
    const scheme = typeof header === 'string' ? header.split(' ', 1)[0].toLowerCase() : '';
    if (scheme === 'bearer') {
      return this.bearer((header as string).slice('bearer'.length).trim()).then((user) => {
        request.user = user;
        return true;
      });
    }
    if (scheme === 'basic') return this.basic.canActivate(context) as Promise<boolean>;
    throw new SluiceError(
      'AUTH_REQUIRED',
      header ? 'unsupported authorization scheme' : 'missing Authorization header',
      undefined,
      challenge(),
    );
  }

  /**
   * A Bearer token's user: its signature and expiry checked (TokenVerifier) unless it was checked
   * before, then its claims judged, every time: revoked, user disabled, password changed.
   */
  private async bearer(token: string): Promise<AuthUser> {
    let claims = this.verified.get(token);
    if (!claims) {
      claims = await this.tokens.verify(token);
      this.verified.remember(token, claims);
    }
    return this.auth.userFromClaims(claims);
  }
}
