import { DynamicModule, Module } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import { SluiceConfig } from '@app/config';
import { MetricsModule } from '../metrics/metrics.module';
import { ExecuteRequestLog } from './execute-request.log';
import { apiLogOptions } from './log.options';

/** Structured JSON logs (pino): one line per request, secrets redacted. */
@Module({})
export class LoggingModule {
  static forRoot(config: SluiceConfig): DynamicModule {
    return {
      module: LoggingModule,
      imports: [LoggerModule.forRoot({ pinoHttp: apiLogOptions(config) }), MetricsModule],
      providers: [ExecuteRequestLog],
    };
  }
}
