import type { FastifyRequest } from 'fastify';
import { AllowedHosts, hostMatches, parseHostAndPort } from '@app/config';
import { SluiceError } from '@app/contracts';

/**
 * Routes answered whatever the Host: load balancers, orchestrators and scrapers reach a process
 * by its address, which no list can know in advance. They take no credentials and say nothing
 * of users or statements.
 */
export const ANY_HOST_ROUTES: ReadonlySet<string> = new Set([
  '/health/live',
  '/health/ready',
  '/metrics',
]);

const READS = new Set(['GET', 'HEAD']);

/** Longest piece of a header quoted back in a reason. */
const QUOTED = 100;

/** What the Host decision looks at. */
export interface HostRequest {
  method: string;
  /** The matched route's pattern, or the path when none matched. */
  route: string;
  /** The `Host` header (absent from an HTTP/1.0 request that did not send one). */
  host: string | undefined;
  /** The `X-Forwarded-Host` header, values a proxy appended to included. */
  forwardedHost: string | undefined;
}

function quoted(text: string): string {
  return JSON.stringify(text.length > QUOTED ? `${text.slice(0, QUOTED)}…` : text);
}

function listed(allowed: readonly { host: string; port?: number }[], value: string): boolean {
  const parsed = parseHostAndPort(value);
  return parsed !== undefined && allowed.some((entry) => hostMatches(entry, parsed));
}

/**
 * Why a request must be refused for the name it was sent to, or undefined when it may go on.
 * `Host` must be on the list, and so must each value of `X-Forwarded-Host`: behind a proxy that
 * passes the client's Host on there, that is the name the browser used. A request with no Host
 * names no host on the list. GET and HEAD of ANY_HOST_ROUTES are answered whatever the Host.
 */
export function hostRefusal(request: HostRequest, allowed: AllowedHosts): string | undefined {
  if (allowed === 'every' || allowed === 'unset') return undefined;
  if (READS.has(request.method.toUpperCase()) && ANY_HOST_ROUTES.has(request.route)) {
    return undefined;
  }
  const why = 'this service does not answer to that name (SLUICE_ALLOWED_HOSTS)';
  const host = request.host ?? '';
  if (host.trim() === '') return `the request has no Host header: ${why}`;
  if (!listed(allowed, host)) return `Host ${quoted(host)} is not allowed: ${why}`;
  if (request.forwardedHost !== undefined) {
    for (const value of request.forwardedHost.split(',')) {
      if (!listed(allowed, value)) {
        return `X-Forwarded-Host ${quoted(value.trim())} is not allowed: ${why}`;
      }
    }
  }
  return undefined;
}

/** The start-up warning the api logs for `allowed`, or undefined when it needs none. */
export function allowedHostsWarning(allowed: AllowedHosts): string | undefined {
  if (allowed !== 'unset') return undefined;
  return (
    'SLUICE_ALLOWED_HOSTS is not set: this api answers requests whatever name they were sent to, ' +
    "so a page whose name an attacker points at this service's address (DNS rebinding) is the " +
    "service's own origin to a browser: it passes the cross-site check and reads the answers, " +
    "from inside the browser's network; set it to the names clients use " +
    '(docs/architecture.md, "Browsers and host names")'
  );
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value.join(',') : value;
}

/**
 * Gate (request.gate.ts), before the cross-site check and authentication: a request sent to a
 * name SLUICE_ALLOWED_HOSTS does not list is refused (421, HOST_NOT_ALLOWED). To a browser, a page
 * on a name rebound to the api's address is the origin of its requests there, so Sec-Fetch-Site
 * and Origin pass, and only the name they were sent to tells them apart. None when every name is
 * allowed.
 */
export function unlistedHost(
  allowed: AllowedHosts,
): ((request: FastifyRequest) => SluiceError | undefined) | undefined {
  if (allowed === 'every' || allowed === 'unset') return undefined;
  return (request) => {
    const reason = hostRefusal(
      {
        method: request.method,
        route: request.routeOptions.url ?? request.url.split('?', 1)[0],
        host: header(request, 'host'),
        forwardedHost: header(request, 'x-forwarded-host'),
      },
      allowed,
    );
    return reason === undefined ? undefined : new SluiceError('HOST_NOT_ALLOWED', reason);
  };
}
