import { Inject, Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import { ExtractJwt, Strategy } from 'passport-jwt';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { AuthUser } from './auth-user';
import { AuthService, TokenClaims } from './auth.service';
import { jwtKey } from './jwt.key';

/**
 * Bearer tokens: HS256 only (no `alg: none`, no key confusion), expiry enforced; then the token
 * must not be revoked, and its user must still be enabled with the same password.
 */
@Injectable()
export class JwtStrategy extends PassportStrategy(Strategy, 'jwt') {
  constructor(
    private readonly auth: AuthService,
    @Inject(SLUICE_CONFIG) config: SluiceConfig,
  ) {
    super({
      jwtFromRequest: ExtractJwt.fromAuthHeaderAsBearerToken(),
      secretOrKey: jwtKey(config.jwtSecret!) as unknown as string,
      algorithms: ['HS256'],
      ignoreExpiration: false,
    });
  }

  validate(claims: TokenClaims): Promise<AuthUser> {
    return this.auth.userFromClaims(claims);
  }
}
