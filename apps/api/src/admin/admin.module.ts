import { Module } from '@nestjs/common';
import { JwtModule } from '@nestjs/jwt';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { AuthModule } from '../auth/auth.module';
import { jwtKey } from '../auth/jwt.key';
import { AdminAuthenticatorService } from './admin-authenticator.service';
import { AdminPageController } from './admin-page.controller';
import { QueueDashboardService } from './queue-dashboard.service';

/** The admin area: the query view at /admin and the queue dashboard at /admin/queues. */
@Module({
  imports: [
    AuthModule,
    // Tokens are checked as AuthModule checks them: HS256 with the same key.
    JwtModule.registerAsync({
      inject: [SLUICE_CONFIG],
      useFactory: (config: SluiceConfig) => ({
        secret: jwtKey(config.jwtSecret!) as unknown as string,
        verifyOptions: { algorithms: ['HS256'] },
      }),
    }),
  ],
  controllers: [AdminPageController],
  providers: [AdminAuthenticatorService, QueueDashboardService],
})
export class AdminModule {}
