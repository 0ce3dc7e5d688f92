import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AllowedHosts } from '@app/config';
import { SluiceError } from '@app/contracts';
import { crossSite } from './cross-site.check';
import { toEnvelope } from './error.envelope';
import { unlistedHost } from './host.check';
import { ambiguousHeaders, undecodableQueryString } from './request.checks';

/** One check of a request's target and headers: why it is refused, or undefined. */
export type Gate = (request: FastifyRequest) => SluiceError | undefined;

/**
 * The checks every request passes before anything else reads it, in order: ambiguous headers
 * (400), a name SLUICE_ALLOWED_HOSTS does not list (421), a query string that does not decode
 * (400), a cross-site request that runs or changes anything (403). The first refusal answers.
 */
export function requestGates(settings: { allowedHosts: AllowedHosts }): Gate[] {
  const host = unlistedHost(settings.allowedHosts);
  return [ambiguousHeaders, ...(host ? [host] : []), undecodableQueryString, crossSite];
}

/**
 * Installs requestGates as one onRequest hook, on the root instance before Nest or any plugin
 * registers anything: before authentication, body parsing and routing on every route, and copied
 * by the encapsulated plugins registered after it (the queue dashboard). A refusal is answered in
 * the envelope, with its headers.
 */
export function installRequestGates(
  fastify: FastifyInstance,
  settings: { allowedHosts: AllowedHosts },
): void {
  const gates = requestGates(settings);
  fastify.addHook('onRequest', (request, reply, done) => {
    for (const gate of gates) {
      const refusal = gate(request);
      if (refusal === undefined) continue;
      const { httpStatus, headers, body } = toEnvelope(refusal);
      void reply
        .code(httpStatus)
        .headers(headers)
        .type('application/json; charset=utf-8')
        .send(body);
      return;
    }
    done();
  });
}
