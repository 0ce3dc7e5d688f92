import { Inject, Injectable } from '@nestjs/common';
import { JwtService } from '@nestjs/jwt';
import { LoginRequestDto, USER_NAME_PATTERN } from '@app/http-contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { RoleCatalogService, UserRecord, UsersService } from '@app/users';
import { AuthUser } from './auth-user';
import {
  AuthService,
  CheckedClaims,
  SignedIn,
  TokenClaims,
  TokenSubject,
  authUser,
  badCredentials,
  invalidToken,
  splitLogin,
} from './auth.service';
import { LoginThrottleService } from './login-throttle.service';
import { RevocationService } from './revocation.service';

/**
 * SLUICE_AUTH=service: users are Sluice's own (`sluice.users`, scrypt password hashes, a
 * PostgreSQL role each); a token stays good while its user is enabled and its password unchanged
 * (the token generation).
 */
@Injectable()
export class ServiceUsersAuthService extends AuthService {
  constructor(
    private readonly users: UsersService,
    private readonly throttle: LoginThrottleService,
    jwt: JwtService,
    revocations: RevocationService,
    roles: RoleCatalogService,
    @Inject(SLUICE_CONFIG) config: SluiceConfig,
  ) {
    super(jwt, revocations, roles, config);
  }

  protected async signIn(request: LoginRequestDto, address: string | undefined): Promise<SignedIn> {
    const login = splitLogin(request.username, request.database);
    const user = await this.verify(login.username, request.password, address);
    if (login.database !== undefined) await this.requireDatabase(user.role, login.database);
    return { subject: serviceSubject(user), database: login.database };
  }

  protected async refreshedSubject(user: AuthUser): Promise<TokenSubject> {
    return serviceSubject(await this.enabledUser(user.username));
  }

  // A service user's token holds no session: the token generation and the user row decide.
  protected extendSession(): Promise<void> {
    return Promise.resolve();
  }

  protected endSession(): Promise<void> {
    return Promise.resolve();
  }

  protected markerOf(claims: TokenClaims): unknown {
    return claims.gen;
  }

  protected async claimsUser({ sub, marker, database }: CheckedClaims): Promise<AuthUser> {
    const record = await this.enabledUser(sub);
    if (record.tokenGeneration !== marker) {
      throw invalidToken('the password changed after this token was issued');
    }
    return {
      ...authUser(serviceSubject(record), database, { readOnly: record.readOnly }),
      userId: record.userId,
    };
  }

  async userFromPassword(login: string, password: string, address?: string): Promise<AuthUser> {
    const named = splitLogin(login, undefined);
    const user = await this.verify(named.username, password, address);
    const database = named.database ?? this.defaultDatabaseFor();
    return {
      ...authUser(serviceSubject(user), database, { readOnly: user.readOnly }),
      userId: user.userId,
    };
  }

  /** DATABASE_URL's database. */
  protected defaultDatabaseFor(): string | undefined {
    return this.roles.defaultDatabase;
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

  private async enabledUser(username: string): Promise<UserRecord> {
    const record = await this.users.find(username);
    if (!record?.enabled) throw invalidToken('the user of this token is disabled or gone');
    return record;
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
