import { Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import type { IncomingMessage } from 'node:http';
import { Strategy } from 'passport-strategy';
import { AuthUser } from './auth-user';
import { AuthService } from './auth.service';
import { TokenVerifier } from './token.verifier';
import { VerifiedTokens } from './verified.tokens';

type Done = (err: unknown, user?: AuthUser | null) => void;
type Verify = (token: string, done: Done) => void;

/**
 * `Authorization: Bearer <token>`: a request with another scheme is not this strategy's (it
 * fails, and passport tries the next); a Bearer token, even an empty one, is judged, and a
 * refused one is an error with the reason (expired, revoked …), never a plain failure.
 */
class BearerTokenStrategy extends Strategy {
  constructor(private readonly verify: Verify) {
    super();
  }

  // Typed as passport's (Express) request; under Fastify, Nest hands it the Fastify request.
  override authenticate(request: IncomingMessage): void {
    const header = request.headers.authorization;
    if (typeof header !== 'string' || header.split(' ', 1)[0].toLowerCase() !== 'bearer') {
      return this.fail(401);
    }
    this.verify(header.slice('bearer'.length).trim(), (err, user) => {
      if (err) this.error(err as Error);
      else if (user) this.success(user);
      else this.fail(401);
    });
  }
}

/**
 * A Bearer token's user: its signature and expiry checked (TokenVerifier) unless it was checked
 * before (VerifiedTokens), then its claims judged, every time: revoked, user disabled, password
 * changed.
 */
@Injectable()
export class BearerStrategy extends PassportStrategy(BearerTokenStrategy, 'bearer') {
  constructor(
    private readonly auth: AuthService,
    private readonly tokens: TokenVerifier,
    private readonly verified: VerifiedTokens,
  ) {
    super();
  }

  async validate(token: string): Promise<AuthUser> {
    let claims = this.verified.get(token);
    if (!claims) {
      claims = await this.tokens.verify(token);
      this.verified.remember(token, claims);
    }
    return this.auth.userFromClaims(claims);
  }
}
