import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Server } from 'node:http';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import {
  ConfigError,
  SluiceConfig,
  isStandalone,
  loadConfig,
  requireClusterSettings,
  setHeapGrowth,
} from '@app/config';
import { startTracing, stopTracing, tracingOn } from '@app/tracing';
import { AppModule } from './app.module';
import { installDocsPageHeaders } from './http/docs-page.headers';
import { allowedHostsWarning } from './http/host.check';
import { describeWire } from './http/openapi.document';
import { clientErrorHandler, frameworkErrorHandler } from './http/request.checks';
import { installRequestGates } from './http/request.gate';
import { installRequestInput } from './http/request.input';
import { apiLogger, flushLogs } from './logging/log.options';
import { StandaloneExecutionService } from './standalone/standalone-execution.service';
import { banner, prepareStandalone, stoppingLine } from './standalone/standalone.bootstrap';
import { installRequestTracing } from './tracing/request.trace';
import { VERSION } from './version';

function config(): SluiceConfig {
  try {
    const loaded = loadConfig();
    requireClusterSettings(loaded, 'api');
    return loaded;
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(1);
    }
    throw err;
  }
}

async function bootstrap(): Promise<void> {
  const loaded = config();
  // Before the embedded PostgreSQL starts: its lines too are the api's (JSON, or readable on a
  // terminal in standalone mode), not Nest's default format among them.
  Logger.overrideLogger(apiLogger(loaded));
  const prepared = await prepareStandalone(loaded);
  const settings = prepared.config;
  // Off (nothing loaded) unless an OTLP endpoint is configured; standalone's pool is traced here.
  await startTracing(settings.tracing, isStandalone(settings) ? 'sluice' : 'sluice-api');
  // Standalone mode's pool threads too: they run in this process.
  setHeapGrowth(settings.heapGrowingPercent);
  const adapter = new FastifyAdapter({
    bodyLimit: settings.maxBodyBytes,
    // Fastify turns Node's limit on receiving a whole request off (0): a client that sent its
    // body a byte at a time held its connection, and up to SLUICE_MAX_BODY_BYTES of the api's
    // memory, for as long as it liked, unauthenticated. Only the request: a response may stream
    // for as long as its statement runs.
    requestTimeout: settings.requestTimeoutMs,
    return503OnClosing: true,
    // Requests Node's parser refuses (bad framing, huge headers) are answered in the envelope.
    clientErrorHandler,
    // So are those Fastify raises before routing (a URL that does not decode).
    frameworkErrors: frameworkErrorHandler,
  });
  // Node takes the larger of the two for the whole request (it swaps them when the headers'
  // limit, 60 s by default, is the larger): the headers get the same time. Node looks for
  // requests past it every 30 s by default (read when the server starts listening): every 5 s.
  // (A constructor option in Node's types; the server reads the property when it listens.)
  const server = adapter.getInstance().server as Server & { connectionsCheckingInterval: number };
  server.headersTimeout = settings.requestTimeoutMs;
  server.connectionsCheckingInterval = Math.min(5_000, settings.requestTimeoutMs);
  // First of all: an execute request's server span covers every check after it.
  if (tracingOn()) installRequestTracing(adapter.getInstance());
  // Before Nest and its plugins register anything: ahead of authentication on every route.
  installRequestGates(adapter.getInstance(), settings);
  // Every body parser and check of raw input, in one place (request.input.ts): Nest adds none.
  installRequestInput(adapter.getInstance(), settings);
  const app = await NestFactory.create<NestFastifyApplication>(
    AppModule.forRoot(settings),
    adapter,
    // JSON lines (pino) at LOG_LEVEL, secrets redacted.
    { logger: apiLogger(settings), bodyParser: false },
  );
  const hostWarning = allowedHostsWarning(settings.allowedHosts);
  if (hostWarning !== undefined) new Logger('Api').warn(hostWarning);
  await app.init();
  const fastify = app.getHttpAdapter().getInstance();
  // Errors Fastify raises before a route runs (bad JSON, size, media type) reach the same
  // EnvelopeFilter: Nest installs Fastify's error handler and passes them through its filters.

  const document = describeWire(
    SwaggerModule.createDocument(
      app,
      new DocumentBuilder()
        .setTitle('Sluice')
        .setDescription('SQL over HTTP for PostgreSQL: POST /v1/execute runs one statement.')
        .setVersion(VERSION)
        .addBearerAuth()
        .addBasicAuth()
        .build(),
    ),
  );
  SwaggerModule.setup('docs', app, document, { jsonDocumentUrl: 'openapi.json' });
  installDocsPageHeaders(fastify);

  // Node closes the keep-alive connections idle when close() begins, not those whose response
  // ends after (fastify#7044): without this, close() waits for the client to hang up.
  let closing = false;
  fastify.addHook('onResponse', (_request, _reply, done) => {
    if (closing) setImmediate(() => fastify.server.closeIdleConnections());
    done();
  });
  // SIGTERM: stop taking requests and finish the responses in flight (within the grace period),
  // then close the modules; the embedded PostgreSQL of standalone mode must outlive their pools.
  const standalone = isStandalone(settings);
  const stop = () => {
    const logger = new Logger('Api');
    closing = true;
    // A person pressed Ctrl-C: say that it is heard, and what it waits for.
    if (standalone) console.log(stoppingLine(app.get(StandaloneExecutionService).runningCount));
    void (async () => {
      const force = setTimeout(
        () => fastify.server.closeAllConnections(),
        settings.shutdownGraceMs,
      );
      // A failing onClose hook must not keep the modules and PostgreSQL from closing.
      await fastify
        .close()
        .catch((err: Error) => logger.warn(`http server closed with an error: ${err.message}`));
      clearTimeout(force);
      await app.close();
      await stopTracing();
      await prepared.embedded?.stop();
    })().then(
      () => {
        if (!standalone) process.exit(0);
        // Last (the log lines still batched go first), and written before exiting: a pipe's
        // write may not be done when exit() is called.
        else {
          flushLogs();
          process.stdout.write('stopped\n', () => process.exit(0));
        }
      },
      (err: unknown) => {
        logger.error(`shutdown failed: ${err instanceof Error ? err.message : String(err)}`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  await app.listen(settings.port, settings.host);
  const shown = settings.host === '0.0.0.0' || settings.host === '::' ? '127.0.0.1' : settings.host;
  const address = fastify.server.address();
  const port = typeof address === 'object' && address ? address.port : settings.port;
  const url = `http://${shown}:${port}`;
  // Last, so that it stays on screen: every log line of the start-up is written before it.
  flushLogs();
  if (standalone) console.log(banner(prepared, url));
  else new Logger('Api').log(`listening on ${url}`);
}

bootstrap().catch((err: unknown) => {
  console.error('api failed to start:', err instanceof Error ? err.message : err);
  process.exit(1);
});
