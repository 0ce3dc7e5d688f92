import { Module } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { JwtModule } from '@nestjs/jwt';
import { PassportModule } from '@nestjs/passport';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { AdminBootstrapService, UsersModule } from '@app/users';
import { AdminGuard } from './admin.guard';
import { AuthController } from './auth.controller';
import { AuthService } from './auth.service';
import { BasicStrategy } from './basic.strategy';
import { BearerStrategy } from './bearer.strategy';
import { CredentialsGuard } from './credentials.guard';
import { DatabaseLoginService } from './database-login.service';
import { DatabaseSessionsService } from './database-sessions.service';
import { DatabaseUsersAuthService } from './database-users-auth.service';
import { ExecutePolicyService } from './execute-policy.service';
import { jwtKey } from './jwt.key';
import { LoginRoleSweepService } from './login-role-sweep.service';
import { LoginThrottleService } from './login-throttle.service';
import { RevocationService } from './revocation.service';
import { RoleIsolationService } from './role-isolation.service';
import { ServiceUsersAuthService } from './service-users-auth.service';
import { TokenVerifier } from './token.verifier';
import { VerifiedTokens } from './verified.tokens';

@Module({
  imports: [
    UsersModule,
    PassportModule.register({ session: false }),
    JwtModule.registerAsync({
      inject: [SLUICE_CONFIG],
      // Signs with SLUICE_JWT_SECRET only; TokenVerifier also takes SLUICE_JWT_PREVIOUS_SECRET.
      useFactory: (config: SluiceConfig) => ({
        secret: jwtKey(config.jwtSecret!),
        signOptions: { algorithm: 'HS256' },
        verifyOptions: { algorithms: ['HS256'] },
      }),
    }),
  ],
  controllers: [AuthController],
  providers: [
    RevocationService,
    RoleIsolationService,
    LoginRoleSweepService,
    LoginThrottleService,
    AdminBootstrapService,
    DatabaseLoginService,
    DatabaseSessionsService,
    {
      // One implementation per SLUICE_AUTH mode, built by the container with its own dependencies.
      provide: AuthService,
      inject: [SLUICE_CONFIG, ModuleRef],
      useFactory: (config: SluiceConfig, modules: ModuleRef): Promise<AuthService> =>
        modules.create<AuthService>(
          config.authMode === 'database' ? DatabaseUsersAuthService : ServiceUsersAuthService,
        ),
    },
    ExecutePolicyService,
    TokenVerifier,
    BearerStrategy,
    BasicStrategy,
    CredentialsGuard,
    AdminGuard,
    VerifiedTokens,
  ],
  exports: [
    TokenVerifier,
    VerifiedTokens,
    AuthService,
    UsersModule,
    CredentialsGuard,
    AdminGuard,
    ExecutePolicyService,
    RevocationService,
  ],
})
export class AuthModule {}
