import type { LoggerService } from '@nestjs/common';
import { Logger, PinoLogger } from 'nestjs-pino';
import type { IncomingMessage } from 'node:http';
import { stdTimeFunctions } from 'pino';
import type { Options } from 'pino-http';
import { SluiceConfig } from '@app/config';

/** Fields that never reach a log line, wherever they appear (one level deep). */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers["proxy-authorization"]',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
  ...['password', 'access_token', 'token', 'params', 'values', 'secret'].flatMap((key) => [
    key,
    `*.${key}`,
  ]),
];

/** What pino-http's request serializer hands on. */
interface LoggedRequest {
  id: unknown;
  method: string;
  url: string;
  remoteAddress?: string;
  headers: Record<string, unknown>;
}

/** Answered often and logged by their own code: no automatic request line. */
const QUIET_PATHS = ['/v1/execute', '/health/', '/metrics'];

/** The path of a URL without its query string (which may carry a statement and its params). */
export function pathOf(url: string | undefined): string {
  if (!url) return '';
  const at = url.indexOf('?');
  return at < 0 ? url : url.slice(0, at);
}

/** pino-http settings of the api: JSON lines at LOG_LEVEL, secrets redacted, no query strings. */
export function apiLogOptions(config: SluiceConfig): Options {
  return {
    name: 'sluice-api',
    level: config.logLevel,
    timestamp: stdTimeFunctions.isoTime,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    autoLogging: {
      // Middleware sees a URL relative to where it is mounted; originalUrl is the whole one.
      ignore: (req: IncomingMessage & { originalUrl?: string }) => {
        const path = pathOf(req.originalUrl ?? req.url);
        return QUIET_PATHS.some((quiet) => path.startsWith(quiet));
      },
    },
    serializers: {
      req: (req: LoggedRequest) => ({
        id: req.id,
        method: req.method,
        url: pathOf(req.url),
        remoteAddress: req.remoteAddress,
        headers: req.headers,
      }),
    },
  };
}

/**
 * Nest's logger for the api, given to NestFactory so that every line is JSON from the first one,
 * including those of a start-up that hangs or fails.
 */
export function apiLogger(config: SluiceConfig): LoggerService {
  const params = { pinoHttp: apiLogOptions(config) };
  return new Logger(new PinoLogger(params), params);
}
