import { Module } from '@nestjs/common';
import { JwtModule } from '@nestjs/jwt';
import { PassportModule } from '@nestjs/passport';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { AuthController } from './auth.controller';
import { AuthService } from './auth.service';
import { BasicStrategy } from './basic.strategy';
import { CredentialsGuard } from './credentials.guard';
import { jwtKey } from './jwt.key';
import { JwtStrategy } from './jwt.strategy';
import { UsersService } from './users.service';

@Module({
  imports: [
    PassportModule.register({ session: false }),
    JwtModule.registerAsync({
      inject: [SLUICE_CONFIG],
      useFactory: (config: SluiceConfig) => ({
        secret: jwtKey(config.jwtSecret!) as unknown as string,
        signOptions: { algorithm: 'HS256' },
        verifyOptions: { algorithms: ['HS256'] },
      }),
    }),
  ],
  controllers: [AuthController],
  providers: [UsersService, AuthService, JwtStrategy, BasicStrategy, CredentialsGuard],
  exports: [AuthService, UsersService, CredentialsGuard],
})
export class AuthModule {}
