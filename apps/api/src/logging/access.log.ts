import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import pinoHttp from 'pino-http';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { apiLogOptions, isQuietPath, logDestination } from './log.options';

/**
 * The access line of every request but the quiet ones (pino-http), from a Fastify hook rather
 * than nestjs-pino's middleware: that middleware runs each request inside an AsyncLocalStorage,
 * whose promise hooks then slow every promise of the process, not only the request's.
 * Nest's own log lines go to the root logger, without the request's fields.
 */
@Injectable()
export class AccessLog implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
  ) {}

  onModuleInit(): void {
    const log = pinoHttp(apiLogOptions(this.config), logDestination(this.config));
    const fastify = this.adapterHost.httpAdapter.getInstance<FastifyInstance>();
    fastify.addHook('onRequest', (request, reply, done) => {
      if (!isQuietPath(request.raw.url)) log(request.raw, reply.raw);
      done();
    });
  }
}
