import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_PIPE } from '@nestjs/core';
import { ConfigModule, SluiceConfig } from '@app/config';
import { AdminModule } from './admin/admin.module';
import { AuthModule } from './auth/auth.module';
import { ExecuteModule } from './execute/execute.module';
import { HealthModule } from './health/health.module';
import { InfoController } from './health/info.controller';
import { EnvelopeFilter } from './http/envelope.filter';
import { StrictValidationPipe } from './http/strict-validation.pipe';
import { InfraModule } from './infra/infra.module';
import { LandingController } from './landing/landing.controller';
import { LoggingModule } from './logging/logging.module';
import { MetricsModule } from './metrics/metrics.module';
import { QueriesModule } from './queries/queries.module';
import { UsersHttpModule } from './users/users-http.module';

/** The HTTP api: authenticates, validates, queues, and streams results back. */
@Module({})
export class AppModule {
  static forRoot(config: SluiceConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        InfraModule.forRoot(config),
        AuthModule,
        ExecuteModule,
        QueriesModule,
        UsersHttpModule,
        LoggingModule.forRoot(config),
        HealthModule,
        MetricsModule,
        AdminModule,
      ],
      controllers: [InfoController, LandingController],
      providers: [
        { provide: APP_PIPE, useValue: new StrictValidationPipe() },
        { provide: APP_FILTER, useClass: EnvelopeFilter },
      ],
    };
  }
}
