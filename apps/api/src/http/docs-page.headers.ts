import type { FastifyInstance } from 'fastify';

/** Where SwaggerModule serves the docs page and its assets. */
const DOCS_PATH = '/docs';

/** The answers under /docs: nobody else's page may frame them. */
const DOCS_HEADERS = {
  'x-frame-options': 'DENY',
  'content-security-policy': "frame-ancestors 'none'",
};

/**
 * The docs page's "Try it out" sends requests from this origin, with whatever credentials the
 * browser holds for it (Basic): framed by another site, a page could steer the clicks (and drag
 * a statement into the form) that run one. Only framing is refused: the page's own scripts are
 * Swagger UI's, inline ones included.
 */
export function installDocsPageHeaders(fastify: FastifyInstance): void {
  fastify.addHook('onSend', (request, reply, payload, done) => {
    const route = request.routeOptions.url;
    if (route === DOCS_PATH || route?.startsWith(`${DOCS_PATH}/`)) void reply.headers(DOCS_HEADERS);
    done(null, payload);
  });
}
