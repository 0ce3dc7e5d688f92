import { Inject, Injectable, Logger } from '@nestjs/common';
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
import { DatabaseLoginService } from './database-login.service';
import { DatabaseSessionsService } from './database-sessions.service';
import { LoginThrottleService } from './login-throttle.service';
import { checkName } from './request.limits';
import { RevocationService } from './revocation.service';
import { RoleCatalogService } from './role-catalog.service';
import { UserRecord, UsersService } from './users.service';

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

const nowSeconds = () => Math.floor(Date.now() / 1000);

const invalidToken = (reason: string) =>
  new SluiceError('TOKEN_INVALID', reason, undefined, challenge('invalid_token', reason));

const badCredentials = () =>
  new SluiceError('BAD_CREDENTIALS', 'invalid username or password', undefined, challenge());

const revoked = (reason: string) =>
  new SluiceError('TOKEN_REVOKED', reason, undefined, challenge('invalid_token', reason));

/** Who a token is issued to. */
interface TokenSubject {
  username: string;
  role: string;
  isAdmin: boolean;
  gen?: string;
  sid?: string;
  /** Database users: their role's id (service users' comes from sluice.users at each request). */
  userId?: string;
}

/** A name PostgreSQL takes as it is: 1 to 63 bytes (longer ones it would cut), no NUL. */
function isDatabaseUserName(name: string): boolean {
  return name !== '' && !name.includes('\u0000') && Buffer.byteLength(name, 'utf8') <= 63;
}

/**
 * Logs users in (by password, with `user@database` naming a default database), issues, refreshes
 * and revokes tokens, and turns token claims back into users. Users are Sluice's own
 * (`sluice.users`) or, with SLUICE_AUTH=database, PostgreSQL's: their password is checked by
 * logging in to PostgreSQL, and each token's session keeps it sealed for the workers.
 */
@Injectable()
export class AuthService {
  private readonly logger = new Logger(AuthService.name);

  constructor(
    private readonly users: UsersService,
    private readonly jwt: JwtService,
    private readonly throttle: LoginThrottleService,
    private readonly revocations: RevocationService,
    private readonly roles: RoleCatalogService,
    private readonly databaseLogins: DatabaseLoginService,
    private readonly sessions: DatabaseSessionsService,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
  ) {}

  /** SLUICE_AUTH=database: users are PostgreSQL's roles, not rows of sluice.users. */
  private get databaseUsers(): boolean {
    return this.config.authMode === 'database';
  }

  async login(request: LoginRequestDto, address?: string): Promise<LoginResponseDto> {
    const ttl = this.config.jwtTtlSeconds;
    const { subject, database } = await this.signIn(request, address, ttl);
    return this.issue(subject, database, nowSeconds(), ttl);
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
    const token = await this.sign(subject, undefined, nowSeconds(), ttl, ADMIN_AUDIENCE);
    return { token, username: subject.username, isAdmin: subject.isAdmin, expiresIn: ttl };
  }

  /** Checks a password login; database users get a session that lives `ttl` seconds. */
  private async signIn(
    request: LoginRequestDto,
    address: string | undefined,
    ttl: number,
  ): Promise<{ subject: TokenSubject; database?: string }> {
    const login = splitLogin(request.username, request.database);
    if (this.databaseUsers) {
      const { password } = request;
      const { username, roleId } = await this.verifyDatabaseUser(
        login.username,
        password,
        login,
        address,
      );
      const subject = { ...(await this.databaseSubject(username)), userId: roleId };
      subject.sid = await this.sessions.open(username, password, nowSeconds() + ttl);
      return { subject, database: login.database };
    }
    const user = await this.verify(login.username, request.password, address);
    if (login.database !== undefined) await this.requireDatabase(user.role, login.database);
    return { subject: serviceSubject(user), database: login.database };
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
    const subject = this.databaseUsers
      ? { ...(await this.databaseSubject(user.username)), sid: user.session, userId: user.userId }
      : serviceSubject(await this.enabledUser(user.username));
    // The default database is not checked here, as at login: every statement is checked anyway.
    const { database } = user;
    if (database !== undefined && database !== this.defaultDatabaseFor(user.username)) {
      await this.requireDatabase(subject.role, database);
    }
    // The old token is replaced, not kept alive beside the new one: revoked before the new one is
    // made, and only the refresh that revoked it gets one. Checked, then revoked after the
    // issue, concurrent refreshes of one token each got a live successor (4 of 10 at once), and
    // a logout of one left the others working.
    if (!(await this.revocations.revoke(token.id, token.expiresAt * 1000, user.username))) {
      throw revoked('token revoked');
    }
    // The session, and the credential it keeps, lasts as long as its newest token.
    if (this.databaseUsers) {
      const extended =
        user.session !== undefined &&
        (await this.sessions.extend(user.session, user.username, nowSeconds() + ttl));
      if (!extended) throw revoked('the session of this token ended');
    }
    return this.issue(subject, user.database, token.authTime, ttl);
  }

  async logout(user: AuthUser): Promise<StatusResponseDto> {
    const token = requireToken(user, 'logout');
    await this.revocations.revoke(token.id, token.expiresAt * 1000, user.username);
    // Database users: the sealed password goes with the session.
    if (user.session !== undefined) await this.sessions.close(user.session);
    return { status: okStatus('logged out') };
  }

  /**
   * The user a verified token speaks for; throws when the token may no longer be used. The admin
   * cookie's token is good only as that cookie, and a Bearer token never as the cookie.
   */
  async userFromClaims(claims: TokenClaims, use: TokenUse = 'bearer'): Promise<AuthUser> {
    const { sub, jti, gen, sid, exp, uid } = claims;
    if (claims.aud !== (use === 'admin-cookie' ? ADMIN_AUDIENCE : undefined)) {
      throw invalidToken('invalid token');
    }
    // A service user's token has a generation, a database user's a session; never both.
    const marker = this.databaseUsers ? sid : gen;
    if (typeof sub !== 'string' || typeof jti !== 'string' || typeof marker !== 'string') {
      throw invalidToken('invalid token');
    }
    if (typeof exp !== 'number') throw invalidToken('invalid token');
    if (await this.revocations.isRevoked(jti)) throw revoked('token revoked');
    const database = typeof claims.db === 'string' ? claims.db : undefined;
    let user: AuthUser;
    if (this.databaseUsers) {
      // Never sluice.users: the session row is what keeps a database user's token alive.
      if (!(await this.sessions.isOpen(marker, sub))) {
        throw revoked('the session of this token ended');
      }
      user = {
        ...authUser(await this.databaseSubject(sub), database),
        session: marker,
        // Absent from tokens issued before role ids: such a user owns what it queued unowned.
        userId: typeof uid === 'string' ? uid : undefined,
      };
    } else {
      const record = await this.enabledUser(sub);
      if (record.tokenGeneration !== marker) {
        throw invalidToken('the password changed after this token was issued');
      }
      user = {
        ...authUser(serviceSubject(record), database, record.readOnly),
        userId: record.userId,
      };
    }
    return {
      ...user,
      token: {
        id: jti,
        expiresAt: exp,
        authTime: typeof claims.auth_time === 'number' ? claims.auth_time : (claims.iat ?? 0),
      },
    };
  }

  /** `Authorization: Basic`: the user (`user` or `user@database`) with this password. */
  async userFromPassword(login: string, password: string, address?: string): Promise<AuthUser> {
    const named = splitLogin(login, undefined);
    const { username } = named;
    if (this.databaseUsers) {
      const { username: name, roleId } = await this.verifyDatabaseUser(
        username,
        password,
        named,
        address,
      );
      const database = named.database ?? this.defaultDatabaseFor(name);
      const user = authUser(await this.databaseSubject(name), database);
      // The password comes with every request: its session serves the one job of this request.
      const session = await this.sessions.open(name, password, nowSeconds(), { singleUse: true });
      return { ...user, session, userId: roleId };
    }
    const user = await this.verify(username, password, address);
    const database = named.database ?? this.defaultDatabaseFor(username);
    return { ...authUser(serviceSubject(user), database, user.readOnly), userId: user.userId };
  }

  /**
   * The database a login that names none will use: DATABASE_URL's; for a database user without
   * one, PostgreSQL's own default, the database named like the user.
   */
  private defaultDatabaseFor(username: string): string | undefined {
    return this.roles.defaultDatabase ?? (this.databaseUsers ? username : undefined);
  }

  /** Checks a password, counting failures; refuses while the user or address is locked out. */
  private async verify(username: string, password: string, address?: string): Promise<UserRecord> {
    // A name that cannot exist never reaches the database, but still counts for the address.
    const valid = USER_NAME_PATTERN.test(username);
    const counted = valid ? username : undefined;
    // Counted before the password is checked (see LoginThrottleService.attempt); a wrong one
    // stays counted.
    await this.throttle.attempt(counted, address);
    const user = valid
      ? await this.users.authenticate(username, password).catch(async (err: unknown) => {
          await this.throttle.abandoned(counted, address);
          throw err;
        })
      : undefined;
    if (!user) throw badCredentials();
    await this.throttle.succeeded(username, address);
    return user;
  }

  /**
   * Database users: PostgreSQL checks the password by a login to the named (or default)
   * database, counted like any login; a missing role and a wrong password look the same.
   */
  private async verifyDatabaseUser(
    username: string,
    password: string,
    login: { database?: string },
    address?: string,
  ): Promise<{ username: string; roleId: string }> {
    const valid = isDatabaseUserName(username);
    const counted = valid ? username : undefined;
    // Counted before the password is checked (see LoginThrottleService.attempt); a wrong one
    // stays counted.
    await this.throttle.attempt(counted, address);
    let result: Awaited<ReturnType<DatabaseLoginService['check']>>;
    try {
      if (login.database !== undefined) checkName('database', login.database);
      result = valid
        ? await this.databaseLogins.check(username, password, login.database)
        : 'refused';
    } catch (err) {
      await this.throttle.abandoned(counted, address);
      throw err;
    }
    if (result === 'refused') throw badCredentials();
    if (result === 'unverified') {
      throw new SluiceError(
        'LOGIN_UNVERIFIED',
        'the database let this login in without asking for its password (its pg_hba.conf trusts ' +
          "Sluice's connections), so it is refused: database users need password authentication " +
          '(scram-sha-256) in pg_hba.conf',
      );
    }
    if (typeof result === 'object' && 'privileged' in result) {
      throw new SluiceError(
        'FORBIDDEN',
        `${result.privileged}: no database user may be (SLUICE_ALLOW_PRIVILEGED_DATABASE_USERS)`,
      );
    }
    await this.throttle.succeeded(username, address);
    if (typeof result === 'object') return { username, roleId: result.roleId };
    const database = login.database ?? this.defaultDatabaseFor(username);
    switch (result) {
      case 'no-database':
        throw new SluiceError('UNKNOWN_DATABASE', `database "${database}" does not exist`);
      case 'no-connect':
        throw new SluiceError(
          'FORBIDDEN',
          `role "${username}" may not connect to database "${database}"`,
        );
    }
  }

  /** A database user as it is now: an administrator while a member of SLUICE_ADMIN_ROLE. */
  private async databaseSubject(username: string): Promise<TokenSubject> {
    const group = this.config.adminRole;
    if (group === undefined) return { username, role: username, isAdmin: false };
    try {
      return { username, role: username, isAdmin: await this.roles.isMember(username, group) };
    } catch (err) {
      this.logger.warn(`cannot read the roles of "${username}": ${(err as Error).message}`);
      throw new SluiceError('DB_UNAVAILABLE', 'cannot read the roles of the database');
    }
  }

  private async enabledUser(username: string): Promise<UserRecord> {
    const record = await this.users.find(username);
    if (!record?.enabled) throw invalidToken('the user of this token is disabled or gone');
    return record;
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

  /** An access token; one that names no database names the default one it will use. */
  private async issue(
    user: TokenSubject,
    named: string | undefined,
    authTime: number,
    ttlSeconds: number,
  ): Promise<LoginResponseDto> {
    const database = named ?? this.defaultDatabaseFor(user.username);
    return {
      access_token: await this.sign(user, database, authTime, ttlSeconds),
      username: user.username,
      database: database ?? null,
      expires_in: ttlSeconds,
      status: okStatus(),
    };
  }

  private sign(
    user: TokenSubject,
    database: string | undefined,
    authTime: number,
    ttlSeconds: number,
    audience?: string,
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

function serviceSubject(user: UserRecord): TokenSubject {
  return {
    username: user.username,
    role: user.role,
    isAdmin: user.isAdmin,
    gen: user.tokenGeneration,
  };
}

function authUser(user: TokenSubject, database: string | undefined, readOnly = false): AuthUser {
  return {
    username: user.username,
    role: user.role,
    isAdmin: user.isAdmin,
    readOnly,
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
