import type { LoggerService } from '@nestjs/common';
import { Logger, PinoLogger } from 'nestjs-pino';
import { stdTimeFunctions } from 'pino';
import type { Options } from 'pino-http';
import { SluiceConfig } from '@app/config';

/** Fields that never reach a log line, wherever they appear (one level deep). */
const REDACTED_KEYS = ['password', 'access_token', 'token', 'params', 'values', 'secret'];

/** pino settings of the worker: JSON lines at LOG_LEVEL, secrets redacted. */
export function workerLogOptions(config: SluiceConfig): Options {
  return {
    name: 'sluice-worker',
    level: config.logLevel,
    timestamp: stdTimeFunctions.isoTime,
    redact: {
      paths: REDACTED_KEYS.flatMap((key) => [key, `*.${key}`]),
      censor: '[redacted]',
    },
  };
}

/**
 * Nest's logger for the worker, given to NestFactory so that every line is JSON from the first
 * one, including those of a start-up that hangs or fails.
 */
export function workerLogger(config: SluiceConfig): LoggerService {
  const params = { pinoHttp: workerLogOptions(config) };
  return new Logger(new PinoLogger(params), params);
}
