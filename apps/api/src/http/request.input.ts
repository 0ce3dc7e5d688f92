import type { FastifyInstance, FastifyRequest } from 'fastify';
import { SluiceError } from '@app/contracts';
import { textBodyRequest } from '../execute/query-options';
import { jsonTextError } from './json-text.check';
import { BodyCheck, ReceivingBudget } from './request.checks';

/** The limits the raw input of a request is held to. */
export interface RequestInputLimits {
  maxBodyBytes: number;
  maxJsonDepth: number;
  maxReceivingBytes: number;
}

/** The media type and charset of a Content-Type header, lower-cased. */
function contentType(request: FastifyRequest): { type: string; charset?: string } {
  const header = request.headers['content-type'];
  const [type, ...parameters] = (typeof header === 'string' ? header : '').split(';');
  const charset = parameters
    .map((p) => p.trim().toLowerCase())
    .find((p) => p.startsWith('charset='))
    ?.slice('charset='.length)
    .replace(/^"|"$/g, '');
  return { type: type.trim().toLowerCase(), charset };
}

/** Methods whose body Fastify never parses (its `bodyless` methods). */
const BODYLESS_METHODS = new Set(['GET', 'HEAD', 'TRACE']);

/**
 * The one place where a request's raw input becomes the plain object its DTO validates, installed
 * on the root instance once, before Nest (which must register no body parser of its own:
 * `bodyParser: false`). Before anything is parsed (preParsing, after every onRequest hook):
 * the `params` JSON of the query string gets the checks of a JSON body, and JSON and text/plain
 * bodies must be UTF-8 (415 for another charset, 400 for bad bytes), counted against the
 * receiving budget as they arrive. Then the parsers: JSON as Fastify parses it, but first held
 * to json-text.check.ts (nested no deeper than `maxJsonDepth`: 413; a number a double would round
 * and a key given twice: 400); text/plain as the statement, its options from the query string.
 * No other media type has a parser (415). Errors go to the envelope error handler; validation
 * of the object parsed is the DTO's (the global pipe, or ExecuteQueryPipe for GET).
 */
export function installRequestInput(fastify: FastifyInstance, limits: RequestInputLimits): void {
  const budget = new ReceivingBudget(limits.maxReceivingBytes);
  fastify.addHook('preParsing', (request, reply, payload, done) => {
    const params = (request.query as Record<string, unknown> | undefined)?.params;
    const paramsProblem =
      typeof params === 'string' ? jsonTextError(params, limits.maxJsonDepth) : undefined;
    if (paramsProblem !== undefined) {
      done(paramsProblem, payload);
      return;
    }
    // Fastify reads no body of these: Node discards it once the response is sent.
    if (BODYLESS_METHODS.has(request.method)) {
      done(null, payload);
      return;
    }
    const { type, charset } = contentType(request);
    if (type !== 'application/json' && type !== 'text/plain') {
      done(null, payload);
      return;
    }
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      done(new SluiceError('UNSUPPORTED_MEDIA_TYPE', 'the request body must be UTF-8'), payload);
      return;
    }
    const check = new BodyCheck(budget);
    // The parser reads every error from the check stream: a client that goes away mid-body
    // fails it too. pipe() and two listeners rather than pipeline(), whose AbortController and
    // the DOMException its end creates cost ≈2% of the api's CPU on small queries.
    // on, not once: an 'error' with no listener left would take the process down.
    payload.on('error', (err) => check.destroy(err));
    payload.once('close', () => {
      if (!payload.readableEnded) check.destroy(new Error('request body ended early'));
    });
    // The parser may never read the check (a 404, a method Fastify routes without parsing) or
    // stop reading it (past the body limit): once the response is done, what the check still
    // holds is nobody's, and its bytes go back to the budget (a body that had all arrived into
    // a check nobody read kept them for good). Its errors then have no listener but this one:
    // an 'error' with none would take the process down.
    check.on('error', () => undefined);
    reply.raw.once('close', () => {
      if (!check.writableFinished) check.destroy();
    });
    done(null, payload.pipe(check));
  });

  // Fastify's own parsers replaced: its JSON parser is kept behind the text checks.
  fastify.removeAllContentTypeParsers();
  const jsonParser = fastify.getDefaultJsonParser('error', 'error');
  fastify.addContentTypeParser(
    'application/json',
    { parseAs: 'string', bodyLimit: limits.maxBodyBytes },
    (request, body, done) => {
      const text = typeof body === 'string' ? body : body.toString('utf8');
      const problem = jsonTextError(text, limits.maxJsonDepth);
      if (problem !== undefined) {
        done(problem, undefined);
        return;
      }
      void jsonParser(request, text, done);
    },
  );
  fastify.addContentTypeParser('text/plain', { parseAs: 'string' }, (request, body, done) => {
    try {
      const query = (request.query ?? {}) as Record<string, unknown>;
      done(null, textBodyRequest(query, typeof body === 'string' ? body : body.toString('utf8')));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
