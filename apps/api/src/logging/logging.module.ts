import { DynamicModule, Module } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import { SluiceConfig } from '@app/config';
import { MetricsModule } from '../metrics/metrics.module';
import { AccessLog } from './access.log';
import { ExecuteRequestLog } from './execute-request.log';
import { apiLogOptions, logDestination } from './log.options';

/** Structured JSON logs (pino): one line per request, secrets redacted. */
@Module({})
export class LoggingModule {
  static forRoot(config: SluiceConfig): DynamicModule {
    return {
      module: LoggingModule,
      imports: [
        // No middleware (forRoutes: none): the access lines come from AccessLog's Fastify hook.
        LoggerModule.forRoot({
          pinoHttp: [apiLogOptions(config), logDestination(config)],
          forRoutes: [],
        }),
        MetricsModule,
      ],
      providers: [AccessLog, ExecuteRequestLog],
    };
  }
}
