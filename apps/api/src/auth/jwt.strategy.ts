import { Inject, Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import type { FastifyRequest } from 'fastify';
import { ExtractJwt, Strategy } from 'passport-jwt';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { AuthUser } from './auth-user';
import { AuthService, TokenClaims } from './auth.service';
import { jwtKey } from './jwt.key';
import { VerifiedTokens } from './verified.tokens';

const bearerToken = ExtractJwt.fromAuthHeaderAsBearerToken();

/**
 * Bearer tokens: HS256 only (no `alg: none`, no key confusion), expiry enforced; then the token
 * must not be revoked, and its user must still be enabled with the same password.
 */
@Injectable()
export class JwtStrategy extends PassportStrategy(Strategy, 'jwt') {
  constructor(
    private readonly auth: AuthService,
    private readonly verified: VerifiedTokens,
    @Inject(SLUICE_CONFIG) config: SluiceConfig,
  ) {
    super({
      jwtFromRequest: bearerToken,
      secretOrKey: jwtKey(config.jwtSecret!) as unknown as string,
      algorithms: ['HS256'],
      ignoreExpiration: false,
      passReqToCallback: true,
    });
  }

  /** The token's signature and expiry are good: remembered, then its claims judged. */
  validate(request: FastifyRequest, claims: TokenClaims): Promise<AuthUser> {
    const token = bearerToken(request);
    if (token) this.verified.remember(token, claims);
    return this.auth.userFromClaims(claims);
  }
}
