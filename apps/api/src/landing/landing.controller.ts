import { Controller, Get, Headers, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import Negotiator from 'negotiator';
import { SluiceError } from '@app/contracts';
import { LANDING_PAGE_CSP, LANDING_PAGE_HTML } from './landing.page';

/** The reason of the 404 an API client gets at /. */
export const ROOT_NOT_FOUND = 'Cannot GET /: the API is under /v1 (described at /openapi.json)';

/**
 * `/` for a browser is a page of links (/admin, /docs, the CLI, the docs); for anything else, by
 * the Accept header, the JSON 404 every unknown path answers: a client that asks for JSON, or
 * says nothing, must never get HTML.
 */
@ApiExcludeController()
@Controller()
export class LandingController {
  @Get()
  page(
    @Headers('accept') accept: string | undefined,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): string {
    void reply.header('vary', 'Accept');
    const preferred = new Negotiator({ headers: { accept } }).mediaType([
      'application/json',
      'text/html',
    ]);
    if (preferred !== 'text/html') throw new SluiceError('NOT_FOUND', ROOT_NOT_FOUND);
    void reply.headers({
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': LANDING_PAGE_CSP,
      'cache-control': 'no-cache',
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
    });
    return LANDING_PAGE_HTML;
  }
}
