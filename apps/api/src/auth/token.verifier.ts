import { Inject, Injectable } from '@nestjs/common';
import { JwtService, JwtVerifyOptions } from '@nestjs/jwt';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { tokenRejection } from './auth.challenge';
import type { TokenClaims } from './auth.service';
import { jwtKey } from './jwt.key';

/**
 * jsonwebtoken's error for a token whose HMAC does not match the key, and only that: a token
 * refused for anything else (algorithm, expiry, audience, form) is refused whatever the key.
 * Its spec fails if the library words it otherwise.
 */
function isBadSignature(err: unknown): boolean {
  return (
    err instanceof Error && err.name === 'JsonWebTokenError' && err.message === 'invalid signature'
  );
}

/**
 * Checks the signature (HS256 only, no `alg: none`, no key confusion) and expiry of every token
 * the api is sent, Bearer or admin cookie: with SLUICE_JWT_SECRET, and while a secret is being
 * rotated out (SLUICE_JWT_PREVIOUS_SECRET) with that one when the current one does not match.
 * Tokens are signed with SLUICE_JWT_SECRET only (AuthModule's JwtService), never here.
 */
@Injectable()
export class TokenVerifier {
  /** Verifies with SLUICE_JWT_PREVIOUS_SECRET, while it is being rotated out. */
  private readonly previous: JwtService | undefined;

  constructor(
    private readonly jwt: JwtService,
    @Inject(SLUICE_CONFIG) config: SluiceConfig,
  ) {
    const previous = config.jwtPreviousSecret;
    this.previous =
      previous === undefined ? undefined : new JwtService({ secret: jwtKey(previous) });
  }

  /**
   * The claims of a good token; otherwise the catalogue's 401 (expired or invalid). With
   * `audience`, the token must name it (the admin cookie's).
   */
  async verify(token: string, audience?: string): Promise<TokenClaims> {
    const options: JwtVerifyOptions = { algorithms: ['HS256'] };
    if (audience !== undefined) options.audience = audience;
    try {
      return await this.jwt.verifyAsync<TokenClaims>(token, options);
    } catch (err) {
      if (this.previous === undefined || !isBadSignature(err)) throw tokenRejection(err);
    }
    try {
      return await this.previous.verifyAsync<TokenClaims>(token, options);
    } catch (err) {
      throw tokenRejection(err);
    }
  }
}
