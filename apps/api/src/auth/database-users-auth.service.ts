import { Inject, Injectable, Logger } from '@nestjs/common';
import { JwtService } from '@nestjs/jwt';
import { SluiceError } from '@app/contracts';
import { LoginRequestDto } from '@app/http-contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { RoleCatalogService } from '@app/users';
import { AuthUser } from './auth-user';
import {
  AuthService,
  CheckedClaims,
  SignedIn,
  TokenClaims,
  TokenSubject,
  authUser,
  badCredentials,
  nowSeconds,
  revoked,
  splitLogin,
} from './auth.service';
import { DatabaseLoginService } from './database-login.service';
import { DatabaseSessionsService } from './database-sessions.service';
import { LoginThrottleService } from './login-throttle.service';
import { checkName } from './request.limits';
import { RevocationService } from './revocation.service';

/** A name PostgreSQL takes as it is: 1 to 63 bytes (longer ones it would cut), no NUL. */
function isDatabaseUserName(name: string): boolean {
  return name !== '' && !name.includes('\u0000') && Buffer.byteLength(name, 'utf8') <= 63;
}

/**
 * SLUICE_AUTH=database: users are PostgreSQL's roles, never rows of sluice.users. Their password
 * is checked by logging in to PostgreSQL, and each token's session keeps it sealed for the
 * workers; a token stays good while its session is open.
 */
@Injectable()
export class DatabaseUsersAuthService extends AuthService {
  private readonly logger = new Logger(DatabaseUsersAuthService.name);

  constructor(
    private readonly throttle: LoginThrottleService,
    private readonly databaseLogins: DatabaseLoginService,
    private readonly sessions: DatabaseSessionsService,
    jwt: JwtService,
    revocations: RevocationService,
    roles: RoleCatalogService,
    @Inject(SLUICE_CONFIG) config: SluiceConfig,
  ) {
    super(jwt, revocations, roles, config);
  }

  protected async signIn(
    request: LoginRequestDto,
    address: string | undefined,
    ttl: number,
  ): Promise<SignedIn> {
    const login = splitLogin(request.username, request.database);
    const { password } = request;
    const { username, roleId } = await this.verify(login.username, password, {
      database: login.database,
      address,
    });
    const subject = { ...(await this.subject(username)), userId: roleId };
    subject.sid = await this.sessions.open(username, password, nowSeconds() + ttl);
    return { subject, database: login.database };
  }

  protected async refreshedSubject(user: AuthUser): Promise<TokenSubject> {
    return { ...(await this.subject(user.username)), sid: user.session, userId: user.userId };
  }

  /** The session, and the credential it keeps, lasts as long as its newest token. */
  protected async extendSession(user: AuthUser, ttl: number): Promise<void> {
    const extended =
      user.session !== undefined &&
      (await this.sessions.extend(user.session, user.username, nowSeconds() + ttl));
    if (!extended) throw revoked('the session of this token ended');
  }

  /** The sealed password goes with the session. */
  protected async endSession(user: AuthUser): Promise<void> {
    if (user.session !== undefined) await this.sessions.close(user.session);
  }

  protected markerOf(claims: TokenClaims): unknown {
    return claims.sid;
  }

  protected async claimsUser({ sub, marker, database, uid }: CheckedClaims): Promise<AuthUser> {
    // Never sluice.users: the session row is what keeps a database user's token alive.
    if (!(await this.sessions.isOpen(marker, sub))) {
      throw revoked('the session of this token ended');
    }
    return {
      ...authUser(await this.subject(sub), database),
      session: marker,
      // Absent from tokens issued before role ids: such a user owns what it queued unowned.
      userId: uid,
    };
  }

  async userFromPassword(login: string, password: string, address?: string): Promise<AuthUser> {
    const named = splitLogin(login, undefined);
    const { username, roleId } = await this.verify(named.username, password, {
      database: named.database,
      address,
    });
    const database = named.database ?? this.defaultDatabaseFor(username);
    const user = authUser(await this.subject(username), database);
    // The password comes with every request: its session serves the one job of this request.
    const session = await this.sessions.open(username, password, nowSeconds(), { singleUse: true });
    return { ...user, session, userId: roleId };
  }

  /** DATABASE_URL's; without one, PostgreSQL's own default, the database named like the user. */
  protected defaultDatabaseFor(username: string): string | undefined {
    return this.roles.defaultDatabase ?? username;
  }

  /**
   * PostgreSQL checks the password by a login to the named (or default) database, counted like
   * any login; a missing role and a wrong password look the same.
   */
  private async verify(
    username: string,
    password: string,
    login: { database?: string; address?: string },
  ): Promise<{ username: string; roleId: string }> {
    const { address } = login;
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
  private async subject(username: string): Promise<TokenSubject> {
    const group = this.config.adminRole;
    if (group === undefined) return { username, role: username, isAdmin: false };
    try {
      return { username, role: username, isAdmin: await this.roles.isMember(username, group) };
    } catch (err) {
      this.logger.warn(`cannot read the roles of "${username}": ${(err as Error).message}`);
      throw new SluiceError('DB_UNAVAILABLE', 'cannot read the roles of the database');
    }
  }
}
