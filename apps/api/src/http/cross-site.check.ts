import type { FastifyRequest } from 'fastify';
import { SluiceError } from '@app/contracts';

/** Methods that neither run nor change anything, except on the routes below. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Routes that run a statement on GET (and on the HEAD Fastify adds to every GET route). */
const RUNS_ON_GET = new Set(['/v1/execute', '/v1/execute/:database']);

/** `Sec-Fetch-Site` values of a request this service's own pages (or a typed URL) made. */
const OWN_SITES = new Set(['same-origin', 'none']);

/** Longest piece of a header quoted back in a reason. */
const QUOTED = 100;

/** What the cross-site decision looks at. */
export interface CrossSiteRequest {
  method: string;
  /** The matched route's pattern (`/v1/execute/:database`), or the path when none matched. */
  route: string;
  /** `http` or `https`, as the client reached the service. */
  protocol: string;
  /** The `Host` header. */
  host: string | undefined;
  origin: string | undefined;
  secFetchSite: string | undefined;
}

/** Whether a request may run a statement or change state: the ones a foreign page must not send. */
export function actsOnRequest(method: string, route: string): boolean {
  return !SAFE_METHODS.has(method.toUpperCase()) || RUNS_ON_GET.has(route);
}

/** `scheme://host[:port]` as browsers serialise it (default port dropped), or undefined. */
function serialisedOrigin(text: string): string | undefined {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : undefined;
  } catch {
    return undefined;
  }
}

function quoted(text: string): string {
  return text.length > QUOTED ? `${text.slice(0, QUOTED)}…` : text;
}

/**
 * Why a request must be refused as cross-site, or undefined when it may go on. Only requests that
 * run or change something are judged: they are refused when `Sec-Fetch-Site` is anything but
 * `same-origin` or `none` (on GET of /v1/execute, anything but `same-origin`), or when an `Origin`
 * header (`null` included) is not the service's own origin. Requests with neither header (curl,
 * server-side clients) go on.
 */
export function crossSiteRefusal(request: CrossSiteRequest): string | undefined {
  if (!actsOnRequest(request.method, request.route)) return undefined;
  const why = 'cross-site requests may not run or change anything';
  // A link opened from a mail or chat program comes as `none`, as a typed URL does, and with the
  // Basic credentials the browser holds: a statement in a URL must come from the service's pages.
  if (
    RUNS_ON_GET.has(request.route) &&
    SAFE_METHODS.has(request.method.toUpperCase()) &&
    request.secFetchSite?.trim().toLowerCase() === 'none'
  ) {
    return `${why}: a statement in a link or typed URL (Sec-Fetch-Site: none) is not run; POST it, or send it without a browser`;
  }
  return foreignOriginRefusal(request, why);
}

/** The judgement of crossSiteRefusal whatever the method: `why`, and what gave the request away. */
export function foreignOriginRefusal(request: CrossSiteRequest, why: string): string | undefined {
  if (request.secFetchSite !== undefined) {
    const site = request.secFetchSite.trim().toLowerCase();
    if (!OWN_SITES.has(site)) return `${why} (Sec-Fetch-Site: ${quoted(site)})`;
  }
  if (request.origin !== undefined) {
    const own = request.host
      ? serialisedOrigin(`${request.protocol}://${request.host}`)
      : undefined;
    if (own === undefined || serialisedOrigin(request.origin) !== own) {
      return `${why} (Origin ${quoted(request.origin)} is not this service's origin${own ? ` ${own}` : ''})`;
    }
  }
  return undefined;
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value.join(',') : value;
}

/** The first value of a header a proxy may have appended to. */
function forwarded(request: FastifyRequest, name: string): string | undefined {
  const value = header(request, name)?.split(',', 1)[0].trim();
  return value ? value : undefined;
}

/** The scheme the client used: a TLS-terminating proxy says so in `X-Forwarded-Proto`. */
export function protocolOf(request: FastifyRequest): string {
  const proto = forwarded(request, 'x-forwarded-proto')?.toLowerCase();
  return proto === 'http' || proto === 'https' ? proto : request.protocol;
}

/** What the cross-site judgement looks at, taken from a request. */
export function crossSiteRequestOf(request: FastifyRequest): CrossSiteRequest {
  return {
    method: request.method,
    route: request.routeOptions.url ?? request.url.split('?', 1)[0],
    // X-Forwarded-* are taken without trustProxy: a foreign page cannot send them without a
    // CORS preflight, which the service never grants, so they cannot make its origin ours.
    protocol: protocolOf(request),
    host: forwarded(request, 'x-forwarded-host') ?? header(request, 'host'),
    origin: header(request, 'origin'),
    secFetchSite: header(request, 'sec-fetch-site'),
  };
}

/**
 * Gate (request.gate.ts): a cross-site request that runs or changes anything is refused (403,
 * CROSS_SITE), before authentication is looked at (a refused login is no failed attempt), before
 * any body is read and before anything is queued. A browser may send Basic credentials it holds
 * for the api, and a text/plain POST or a GET needs no CORS preflight, so without this a page on
 * any site could make an administrator's browser run SQL.
 */
export function crossSite(request: FastifyRequest): SluiceError | undefined {
  const reason = crossSiteRefusal(crossSiteRequestOf(request));
  return reason === undefined ? undefined : new SluiceError('CROSS_SITE', reason);
}
