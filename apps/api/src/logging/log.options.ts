import type { LoggerService } from '@nestjs/common';
import { Logger, Params, PinoLogger } from 'nestjs-pino';
import type { IncomingMessage } from 'node:http';
import pino, { DestinationStream, Logger as Pino, destination, stdTimeFunctions } from 'pino';
import type { Options } from 'pino-http';
import { SluiceConfig, isStandalone } from '@app/config';
import { readableLogLine } from './readable-log.formatter';

/** Log lines are written when this many bytes are waiting, or FLUSH_EVERY_MS after the first. */
const BATCH_BYTES = 8_192;
const FLUSH_EVERY_MS = 200;
type FlushableStream = DestinationStream & { flush(): void; flushSync(): void };
let logStream: FlushableStream | undefined;

/**
 * Standard output, written in batches rather than one write per line: under load a line per
 * request, each a write system call of its own, costs the api more than the line. Lines wait at most
 * FLUSH_EVERY_MS, and what waits is written when the process exits (not if it is killed).
 * Standalone mode on a terminal is read by a person: each line is written at once, readable
 * (readable-log.formatter.ts); cluster mode and anything piped keep JSON lines.
 */
export function logDestination(config: SluiceConfig): DestinationStream {
  if (!logStream) {
    logStream =
      isStandalone(config) && process.stdout.isTTY ? readableDestination() : batchedDestination();
  }
  return logStream;
}

function batchedDestination(): FlushableStream {
  const stream = destination({ dest: 1, minLength: BATCH_BYTES, sync: true });
  setInterval(() => stream.flush(), FLUSH_EVERY_MS).unref();
  process.once('exit', () => stream.flushSync());
  return stream;
}

function readableDestination(): FlushableStream {
  return {
    write(json: string) {
      const line = readableLogLine(json);
      if (line !== undefined) process.stdout.write(`${line}\n`);
    },
    // Nothing waits: each line is written as it comes.
    flush: () => undefined,
    flushSync: () => undefined,
  };
}

/** Writes every line that waits, before something printed beside the log (the banner). */
export function flushLogs(): void {
  logStream?.flushSync();
}

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

/** Whether requests to this URL go without an automatic access line. */
export function isQuietPath(url: string | undefined): boolean {
  const path = pathOf(url);
  return QUIET_PATHS.some((quiet) => path.startsWith(quiet));
}

/** pino-http settings of the api: JSON lines at LOG_LEVEL, secrets redacted, no query strings. */
export function apiLogOptions(config: SluiceConfig): Options {
  return {
    name: 'sluice-api',
    level: config.logLevel,
    timestamp: stdTimeFunctions.isoTime,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    autoLogging: {
      // Under a mounted middleware the URL is relative and originalUrl the whole one; AccessLog
      // hands over the raw request, whose URL is whole.
      ignore: (req: IncomingMessage & { originalUrl?: string }) =>
        isQuietPath(req.originalUrl ?? req.url),
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
  const params: Params = { pinoHttp: [apiLogOptions(config), logDestination(config)] };
  return new Logger(new PinoLogger(params), params);
}

/**
 * The logger of the line each execute request ends with: the api's name, level, timestamps and
 * destination, without redaction. That line's fields are fixed (ExecuteRequestLog) and hold no
 * secret, while redaction walks its wildcard paths over every line it is given, and nestjs-pino's
 * wrapper adds its own work to each: neither is worth paying on a line per request.
 */
export function executeLineLogger(config: SluiceConfig): Pino {
  return pino(
    { name: 'sluice-api', level: config.logLevel, timestamp: stdTimeFunctions.isoTime },
    logDestination(config),
  ).child({ context: 'ExecuteRequest' });
}
