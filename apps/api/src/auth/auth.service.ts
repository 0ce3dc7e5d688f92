import { Inject, Injectable } from '@nestjs/common';
import { JwtService } from '@nestjs/jwt';
import { randomUUID } from 'node:crypto';
import {
  LoginRequestDto,
  LoginResponseDto,
  SluiceError,
  StatusResponseDto,
  USER_NAME_PATTERN,
  okStatus,
} from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { challenge } from './auth.challenge';
import { AuthUser } from './auth-user';
import { LoginThrottleService } from './login-throttle.service';
import { checkName } from './request.limits';
import { RevocationService } from './revocation.service';
import { RoleCatalogService } from './role-catalog.service';
import { UserRecord, UsersService } from './users.service';

/** Claims of a Sluice access token. */
export interface TokenClaims {
  sub: string;
  role: string;
  db?: string;
  adm?: boolean;
  exp?: number;
  iat?: number;
  jti?: string;
  /** The user's token generation when it was issued. */
  gen?: string;
  /** When the login that began the session happened (s); refreshes keep it. */
  auth_time?: number;
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

const invalidToken = (reason: string) =>
  new SluiceError('TOKEN_INVALID', reason, undefined, challenge('invalid_token', reason));

const badCredentials = () =>
  new SluiceError('BAD_CREDENTIALS', 'invalid username or password', undefined, challenge());

/**
 * Logs users in (by password, with `user@database` naming a default database), issues, refreshes
 * and revokes tokens, and turns token claims back into users.
 */
@Injectable()
export class AuthService {
  constructor(
    private readonly users: UsersService,
    private readonly jwt: JwtService,
    private readonly throttle: LoginThrottleService,
    private readonly revocations: RevocationService,
    private readonly roles: RoleCatalogService,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
  ) {}

  async login(request: LoginRequestDto, address?: string): Promise<LoginResponseDto> {
    const login = splitLogin(request.username, request.database);
    const user = await this.verify(login.username, request.password, address);
    if (login.database !== undefined) await this.requireDatabase(user.role, login.database);
    return this.issue(user, login.database, nowSeconds(), this.config.jwtTtlSeconds);
  }

  /** A new token for a valid one, while the session is inside its refresh window. */
  async refresh(user: AuthUser): Promise<LoginResponseDto> {
    const token = requireToken(user, 'token_refresh');
    const windowEnd = token.authTime + this.config.jwtRefreshWindowSeconds;
    const left = windowEnd - nowSeconds();
    if (left <= 0) {
      const reason = 'the refresh window of this session is over; log in again';
      throw new SluiceError('TOKEN_EXPIRED', reason, undefined, challenge('invalid_token', reason));
    }
    const record = await this.users.find(user.username);
    if (!record?.enabled) throw invalidToken('the user of this token is disabled or gone');
    if (user.database !== undefined) await this.requireDatabase(record.role, user.database);
    const issued = await this.issue(
      record,
      user.database,
      token.authTime,
      Math.min(this.config.jwtTtlSeconds, left),
    );
    // The old token is replaced, not kept alive beside the new one.
    await this.revocations.revoke(token.id, token.expiresAt * 1000, user.username);
    return issued;
  }

  async logout(user: AuthUser): Promise<StatusResponseDto> {
    const token = requireToken(user, 'logout');
    await this.revocations.revoke(token.id, token.expiresAt * 1000, user.username);
    return { status: okStatus('logged out') };
  }

  /** The user a verified token speaks for; throws when the token may no longer be used. */
  async userFromClaims(claims: TokenClaims): Promise<AuthUser> {
    const { sub, jti, gen, exp } = claims;
    if (typeof sub !== 'string' || typeof jti !== 'string' || typeof gen !== 'string') {
      throw invalidToken('invalid token');
    }
    if (typeof exp !== 'number') throw invalidToken('invalid token');
    if (await this.revocations.isRevoked(jti)) {
      throw new SluiceError(
        'TOKEN_REVOKED',
        'token revoked',
        undefined,
        challenge('invalid_token', 'token revoked'),
      );
    }
    const user = await this.users.find(sub);
    if (!user?.enabled) throw invalidToken('the user of this token is disabled or gone');
    if (user.tokenGeneration !== gen) {
      throw invalidToken('the password changed after this token was issued');
    }
    return {
      ...authUser(user, typeof claims.db === 'string' ? claims.db : undefined),
      token: {
        id: jti,
        expiresAt: exp,
        authTime: typeof claims.auth_time === 'number' ? claims.auth_time : (claims.iat ?? 0),
      },
    };
  }

  /** `Authorization: Basic`: the user (`user` or `user@database`) with this password. */
  async userFromPassword(login: string, password: string, address?: string): Promise<AuthUser> {
    const { username, database } = splitLogin(login, undefined);
    return authUser(await this.verify(username, password, address), database);
  }

  /** Checks a password, counting failures; refuses while the user or address is locked out. */
  private async verify(username: string, password: string, address?: string): Promise<UserRecord> {
    // A name that cannot exist never reaches the database, but still counts for the address.
    const valid = USER_NAME_PATTERN.test(username);
    await this.throttle.check(valid ? username : undefined, address);
    const user = valid ? await this.users.authenticate(username, password) : undefined;
    if (!user) {
      await this.throttle.failed(valid ? username : undefined, address);
      throw badCredentials();
    }
    await this.throttle.succeeded(username);
    return user;
  }

  /** The role must exist and have CONNECT on the database. */
  private async requireDatabase(role: string, database: string): Promise<void> {
    checkName('database', database);
    const access = await this.roles.databaseAccess(role, database);
    switch (access) {
      case 'ok':
        return;
      case 'no-database':
        throw new SluiceError('UNKNOWN_DATABASE', `database "${database}" does not exist`);
      case 'no-role':
        throw new SluiceError('FORBIDDEN', `the role of this user no longer exists`);
      case 'no-connect':
        throw new SluiceError(
          'FORBIDDEN',
          `role "${role}" may not connect to database "${database}"`,
        );
    }
  }

  private async issue(
    user: UserRecord,
    database: string | undefined,
    authTime: number,
    ttlSeconds: number,
  ): Promise<LoginResponseDto> {
    const claims: TokenClaims = {
      sub: user.username,
      role: user.role,
      jti: randomUUID(),
      gen: user.tokenGeneration,
      auth_time: authTime,
    };
    if (database !== undefined) claims.db = database;
    if (user.isAdmin) claims.adm = true;
    const token = await this.jwt.signAsync(claims, { algorithm: 'HS256', expiresIn: ttlSeconds });
    return {
      access_token: token,
      username: user.username,
      database: database ?? null,
      expires_in: ttlSeconds,
      status: okStatus(),
    };
  }
}

function authUser(user: UserRecord, database: string | undefined): AuthUser {
  return {
    username: user.username,
    role: user.role,
    isAdmin: user.isAdmin,
    readOnly: user.readOnly,
    database,
  };
}

/** `alice@sales` logs in as alice with sales as the default database. */
function splitLogin(
  login: string,
  database: string | undefined,
): { username: string; database?: string } {
  const at = login.indexOf('@');
  if (at < 0) return { username: login, database };
  const named = login.slice(at + 1);
  if (named === '' || named.length > 63) {
    throw new SluiceError('INVALID_REQUEST', 'the database after @ must be 1 to 63 characters');
  }
  if (database !== undefined && database !== named) {
    throw new SluiceError('INVALID_REQUEST', 'the database after @ and in the body differ');
  }
  return { username: login.slice(0, at), database: named };
}

function requireToken(user: AuthUser, operation: string) {
  if (!user.token) {
    throw new SluiceError('INVALID_REQUEST', `${operation} needs a Bearer token`);
  }
  return user.token;
}
