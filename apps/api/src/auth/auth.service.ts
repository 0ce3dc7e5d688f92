import { JwtService } from '@nestjs/jwt';
import { randomUUID } from 'node:crypto';
import { SluiceError, okStatus } from '@app/contracts';
import { LoginRequestDto, LoginResponseDto, StatusResponseDto } from '@app/http-contracts';
import { SluiceConfig } from '@app/config';
import { RoleCatalogService } from '@app/users';
import { challenge } from './auth.challenge';
import { AuthUser, PresentedToken } from './auth-user';
import { checkName } from './request.limits';
import { RevocationService } from './revocation.service';

/** Claims of a Sluice access token. */
export interface TokenClaims {
  sub: string;
  /** Only on the admin pages' cookie token (ADMIN_AUDIENCE): never taken as a Bearer token. */
  aud?: string | string[];
  role: string;
  db?: string;
  adm?: boolean;
  exp?: number;
  iat?: number;
  jti?: string;
  /** Service users: the user's token generation when it was issued. */
  gen?: string;
  /** Database users: the session that keeps their sealed credential; refreshes keep it. */
  sid?: string;
  /** Database users: their role's id at login (DatabaseRole); refreshes keep it. */
  uid?: string;
  /** When the login that began the session happened (s); refreshes keep it. */
  auth_time?: number;
}

/** Audience of the admin pages' sign-in cookie: a token good under /admin only. */
export const ADMIN_AUDIENCE = 'sluice-admin';

/** How a token reached the api: as a Bearer token, or in the admin pages' cookie. */
export type TokenUse = 'bearer' | 'admin-cookie';

/** The admin pages' sign-in: the cookie's token and whom it speaks for. */
export interface AdminSession {
  token: string;
  username: string;
  isAdmin: boolean;
  expiresIn: number;
}

/** Who a token is issued to. */
export interface TokenSubject {
  username: string;
  role: string;
  isAdmin: boolean;
  /** Service users: their token generation. */
  gen?: string;
  /** Database users: the session that keeps their sealed credential. */
  sid?: string;
  /** Database users: their role's id (service users' comes from sluice.users at each request). */
  userId?: string;
}

/** A checked password login: whom to issue the token to, and the database it named. */
export interface SignedIn {
  subject: TokenSubject;
  database?: string;
}

/** When a token's login was checked (epoch s) and how long the token lives (s). */
interface TokenLife {
  authTime: number;
  ttlSeconds: number;
}

/** The claims of a token that every mode requires, checked and not revoked. */
export interface CheckedClaims {
  sub: string;
  /** The mode's own claim: a service user's `gen`, a database user's `sid`. */
  marker: string;
  database?: string;
  uid?: string;
}

export const nowSeconds = () => Math.floor(Date.now() / 1000);

export const invalidToken = (reason: string) =>
  new SluiceError('TOKEN_INVALID', reason, undefined, challenge('invalid_token', reason));

export const badCredentials = () =>
  new SluiceError('BAD_CREDENTIALS', 'invalid username or password', undefined, challenge());

export const revoked = (reason: string) =>
  new SluiceError('TOKEN_REVOKED', reason, undefined, challenge('invalid_token', reason));

/**
 * Logs users in (by password, with `user@database` naming a default database), issues, refreshes
 * and revokes tokens, and turns token claims back into users. What is shared by both kinds of
 * user is here; who the users are is the mode's (AuthModule picks one by SLUICE_AUTH):
 * ServiceUsersAuthService (`sluice.users`) or DatabaseUsersAuthService (PostgreSQL's roles).
 */
export abstract class AuthService {
  protected constructor(
    private readonly jwt: JwtService,
    private readonly revocations: RevocationService,
    protected readonly roles: RoleCatalogService,
    protected readonly config: SluiceConfig,
  ) {}

  /** Checks a password login; a session the mode keeps lives `ttl` seconds. */
  protected abstract signIn(
    request: LoginRequestDto,
    address: string | undefined,
    ttl: number,
  ): Promise<SignedIn>;

  /** Whom a refreshed token is issued to, as the user is now. */
  protected abstract refreshedSubject(user: AuthUser): Promise<TokenSubject>;

  /** Keeps what the mode holds for the session alive `ttl` more seconds, or refuses. */
  protected abstract extendSession(user: AuthUser, ttl: number): Promise<void>;

  /** Ends what the mode holds for the session of a token logged out. */
  protected abstract endSession(user: AuthUser): Promise<void>;

  /** The claim that binds a token to the mode's users: a service user's `gen`, a database user's `sid`. */
  protected abstract markerOf(claims: TokenClaims): unknown;

  /** The user of a token whose common claims were checked; throws when it may no longer be used. */
  protected abstract claimsUser(claims: CheckedClaims): Promise<AuthUser>;

  /** `Authorization: Basic`: the user (`user` or `user@database`) with this password. */
  abstract userFromPassword(login: string, password: string, address?: string): Promise<AuthUser>;

  /** The database a login that names none will use. */
  protected abstract defaultDatabaseFor(username: string): string | undefined;

  async login(request: LoginRequestDto, address?: string): Promise<LoginResponseDto> {
    const ttl = this.config.jwtTtlSeconds;
    const { subject, database } = await this.signIn(request, address, ttl);
    return this.issue(subject, database, { authTime: nowSeconds(), ttlSeconds: ttl });
  }

  /**
   * The admin pages' sign-in: checked and throttled like a login, answered with a token for the
   * pages' cookie, short-lived (SLUICE_ADMIN_SESSION_SECONDS) and good under /admin only.
   */
  async adminSession(
    request: { username: string; password: string },
    address?: string,
  ): Promise<AdminSession> {
    const ttl = this.config.adminSessionSeconds;
    const { subject } = await this.signIn(request, address, ttl);
    const token = await this.sign(subject, undefined, {
      authTime: nowSeconds(),
      ttlSeconds: ttl,
      audience: ADMIN_AUDIENCE,
    });
    return { token, username: subject.username, isAdmin: subject.isAdmin, expiresIn: ttl };
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
    const ttl = Math.min(this.config.jwtTtlSeconds, left);
    const subject = await this.refreshedSubject(user);
    // The default database is not checked here, as at login: every statement is checked anyway.
    const { database } = user;
    if (database !== undefined && database !== this.defaultDatabaseFor(user.username)) {
      await this.requireDatabase(subject.role, database);
    }
    // The old token is replaced, not kept alive beside the new one: revoked before the new one is
    // made, and only the refresh that revoked it gets one, so concurrent refreshes of one token
    // cannot each get a live successor, and a logout of one leaves none working.
    if (!(await this.revocations.revoke(token.id, token.expiresAt * 1000, user.username))) {
      throw revoked('token revoked');
    }
    await this.extendSession(user, ttl);
    return this.issue(subject, user.database, { authTime: token.authTime, ttlSeconds: ttl });
  }

  async logout(user: AuthUser): Promise<StatusResponseDto> {
    const token = requireToken(user, 'logout');
    await this.revocations.revoke(token.id, token.expiresAt * 1000, user.username);
    await this.endSession(user);
    return { status: okStatus('logged out') };
  }

  /**
   * The user a verified token speaks for; throws when the token may no longer be used. The admin
   * cookie's token is good only as that cookie, and a Bearer token never as the cookie.
   */
  async userFromClaims(claims: TokenClaims, use: TokenUse = 'bearer'): Promise<AuthUser> {
    const { sub, jti, exp, uid } = claims;
    if (claims.aud !== (use === 'admin-cookie' ? ADMIN_AUDIENCE : undefined)) {
      throw invalidToken('invalid token');
    }
    // A service user's token has a generation, a database user's a session; never both.
    const marker = this.markerOf(claims);
    if (typeof sub !== 'string' || typeof jti !== 'string' || typeof marker !== 'string') {
      throw invalidToken('invalid token');
    }
    if (typeof exp !== 'number') throw invalidToken('invalid token');
    if (await this.revocations.isRevoked(jti)) throw revoked('token revoked');
    const user = await this.claimsUser({
      sub,
      marker,
      database: typeof claims.db === 'string' ? claims.db : undefined,
      uid: typeof uid === 'string' ? uid : undefined,
    });
    const token: PresentedToken = {
      id: jti,
      expiresAt: exp,
      authTime: typeof claims.auth_time === 'number' ? claims.auth_time : (claims.iat ?? 0),
    };
    return { ...user, token };
  }

  /** The role must exist and have CONNECT on the database. */
  protected async requireDatabase(role: string, database: string): Promise<void> {
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

  /** An access token; one that names no database names the default one it will use. */
  private async issue(
    user: TokenSubject,
    named: string | undefined,
    life: TokenLife,
  ): Promise<LoginResponseDto> {
    const database = named ?? this.defaultDatabaseFor(user.username);
    const { ttlSeconds } = life;
    return {
      access_token: await this.sign(user, database, life),
      username: user.username,
      database: database ?? null,
      expires_in: ttlSeconds,
      status: okStatus(),
    };
  }

  private sign(
    user: TokenSubject,
    database: string | undefined,
    { authTime, ttlSeconds, audience }: TokenLife & { audience?: string },
  ): Promise<string> {
    const claims: TokenClaims = {
      sub: user.username,
      role: user.role,
      jti: randomUUID(),
      auth_time: authTime,
    };
    if (user.gen !== undefined) claims.gen = user.gen;
    if (user.sid !== undefined) claims.sid = user.sid;
    if (user.userId !== undefined) claims.uid = user.userId;
    if (database !== undefined) claims.db = database;
    if (user.isAdmin) claims.adm = true;
    if (audience !== undefined) claims.aud = audience;
    return this.jwt.signAsync(claims, { algorithm: 'HS256', expiresIn: ttlSeconds });
  }
}

/** The caller a subject makes, with the database it uses. */
export function authUser(
  user: TokenSubject,
  database: string | undefined,
  { readOnly = false }: { readOnly?: boolean } = {},
): AuthUser {
  return {
    username: user.username,
    role: user.role,
    isAdmin: user.isAdmin,
    readOnly,
    database,
  };
}

/** `alice@sales` logs in as alice with sales as the default database. */
export function splitLogin(
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
