import { Inject, Injectable } from '@nestjs/common';
import { JwtService } from '@nestjs/jwt';
import { randomUUID } from 'node:crypto';
import { LoginRequestDto, LoginResponseDto, SluiceError, okStatus } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { AuthUser } from './auth-user';
import { UsersService } from './users.service';

/** Claims of a Sluice access token. */
export interface TokenClaims {
  sub: string;
  role: string;
  db?: string;
  adm?: boolean;
  exp?: number;
  jti?: string;
}

export const BEARER_CHALLENGE = 'Bearer realm="sluice", Basic realm="sluice"';

/** Logs users in and turns token claims back into users. */
@Injectable()
export class AuthService {
  constructor(
    private readonly users: UsersService,
    private readonly jwt: JwtService,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
  ) {}

  async login(request: LoginRequestDto): Promise<LoginResponseDto> {
    const user = await this.users.authenticate(request.username, request.password);
    if (!user) {
      throw new SluiceError('BAD_CREDENTIALS', 'invalid username or password', undefined, {
        'WWW-Authenticate': BEARER_CHALLENGE,
      });
    }
    const claims: TokenClaims = { sub: user.username, role: user.role, jti: randomUUID() };
    if (request.database) claims.db = request.database;
    if (user.isAdmin) claims.adm = true;
    const token = await this.jwt.signAsync(claims, {
      algorithm: 'HS256',
      expiresIn: this.config.jwtTtlSeconds,
    });
    return {
      access_token: token,
      username: user.username,
      database: request.database ?? null,
      expires_in: this.config.jwtTtlSeconds,
      status: okStatus(),
    };
  }

  /** The user a verified token speaks for; undefined when that user is gone or disabled. */
  async userFromClaims(claims: TokenClaims): Promise<AuthUser | undefined> {
    const user = await this.users.find(claims.sub);
    if (!user?.enabled) return undefined;
    return {
      username: user.username,
      role: user.role,
      isAdmin: user.isAdmin,
      readOnly: user.readOnly,
      database: claims.db,
    };
  }

  async userFromPassword(username: string, password: string): Promise<AuthUser | undefined> {
    const user = await this.users.authenticate(username, password);
    if (!user) return undefined;
    return {
      username: user.username,
      role: user.role,
      isAdmin: user.isAdmin,
      readOnly: user.readOnly,
    };
  }
}
