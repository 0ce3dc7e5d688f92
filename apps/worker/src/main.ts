import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ConfigError, loadConfig, requireClusterSettings, setHeapGrowth } from '@app/config';
import { startTracing } from '@app/tracing';
import { workerLogger } from './logging/worker-log.options';
import { lowerExportPriority } from './export.priority';
import { WorkerModule } from './worker.module';

async function bootstrap(): Promise<void> {
  let config;
  try {
    config = loadConfig();
    requireClusterSettings(config, 'worker');
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(1);
    }
    throw err;
  }
  // Before the pool's threads exist: they inherit it.
  const nice = lowerExportPriority(config);
  setHeapGrowth(config.heapGrowingPercent);
  // Before anything makes a span: off (nothing loaded) unless an OTLP endpoint is configured.
  await startTracing(config.tracing, 'sluice-worker');
  const app = await NestFactory.createApplicationContext(WorkerModule.forRoot(config), {
    // JSON lines (pino) at LOG_LEVEL, secrets redacted.
    logger: workerLogger(config),
  });
  app.enableShutdownHooks();
  await app.init();
  if (nice !== undefined) new Logger('Worker').log(`serving only the export lane, at nice ${nice}`);
  new Logger('Worker').log('ready');
}

bootstrap().catch((err: unknown) => {
  console.error('worker failed to start:', err instanceof Error ? err.message : err);
  process.exit(1);
});
