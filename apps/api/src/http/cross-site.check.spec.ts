import Fastify, { FastifyInstance } from 'fastify';
import { CrossSiteRequest, crossSite, crossSiteRefusal } from './cross-site.check';
import { installRequestGates } from './request.gate';

const OWN = 'http://127.0.0.1:8080';

function judge(overrides: Partial<CrossSiteRequest>): string | undefined {
  return crossSiteRefusal({
    method: 'POST',
    route: '/v1/execute',
    protocol: 'http',
    host: '127.0.0.1:8080',
    origin: undefined,
    secFetchSite: undefined,
    ...overrides,
  });
}

describe(crossSiteRefusal.name, () => {
  it('passes a same-origin request', () => {
    expect(judge({ origin: OWN, secFetchSite: 'same-origin' })).toBeUndefined();
  });

  it('passes a request with neither Origin nor Sec-Fetch-Site (curl, server-side clients)', () => {
    expect(judge({})).toBeUndefined();
    expect(judge({ method: 'DELETE', route: '/v1/queries/:queryId' })).toBeUndefined();
  });

  it('passes Sec-Fetch-Site none (a typed URL or bookmark) where no statement is in the URL', () => {
    expect(judge({ method: 'POST', secFetchSite: 'none' })).toBeUndefined();
    expect(judge({ method: 'GET', route: '/v1/info', secFetchSite: 'none' })).toBeUndefined();
    expect(
      judge({ method: 'DELETE', route: '/v1/queries/:queryId', secFetchSite: 'none' }),
    ).toBeUndefined();
  });

  it.each([
    ['GET', '/v1/execute'],
    ['HEAD', '/v1/execute/:database'],
    ['get', '/v1/execute'],
  ])(
    'refuses Sec-Fetch-Site none on %s %s: a link opened from a mail program comes so too',
    (method, route) => {
      expect(judge({ method, route, secFetchSite: 'None ' })).toMatch(
        /a statement in a link or typed URL \(Sec-Fetch-Site: none\) is not run/,
      );
    },
  );

  it.each(['cross-site', 'same-site', 'Cross-Site', 'something-else', ''])(
    'refuses Sec-Fetch-Site %p',
    (site) => {
      expect(judge({ secFetchSite: site })).toMatch(
        /^cross-site requests may not run or change anything \(Sec-Fetch-Site: /,
      );
    },
  );

  it('refuses a foreign Origin and names it', () => {
    expect(judge({ origin: 'http://evil.example' })).toBe(
      "cross-site requests may not run or change anything (Origin http://evil.example is not this service's origin http://127.0.0.1:8080)",
    );
  });

  it('refuses a foreign Origin even when Sec-Fetch-Site says same-origin', () => {
    expect(judge({ origin: 'http://evil.example', secFetchSite: 'same-origin' })).toBeDefined();
  });

  it('refuses Origin null (sandboxed frames, opaque origins)', () => {
    expect(judge({ origin: 'null' })).toMatch(/Origin null is not/);
  });

  it('takes another port or scheme of the same host for another origin', () => {
    expect(judge({ origin: 'http://127.0.0.1:8081' })).toBeDefined();
    expect(judge({ origin: 'https://127.0.0.1:8080' })).toBeDefined();
    expect(judge({ origin: 'http://localhost:8080' })).toBeDefined();
  });

  it('compares origins as browsers serialise them (default port, letter case)', () => {
    expect(judge({ host: 'API.example', origin: 'http://api.example:80' })).toBeUndefined();
    expect(
      judge({ protocol: 'https', host: 'api.example:443', origin: 'https://api.example' }),
    ).toBeUndefined();
  });

  it('refuses an Origin when the request has no Host to compare it with', () => {
    expect(judge({ host: undefined, origin: OWN })).toBeDefined();
  });

  it('passes GET /v1/info, and other reads, from any site', () => {
    const foreign = { method: 'GET', origin: 'http://evil.example', secFetchSite: 'cross-site' };
    expect(judge({ ...foreign, route: '/v1/info' })).toBeUndefined();
    expect(judge({ ...foreign, route: '/v1/queries' })).toBeUndefined();
    expect(judge({ ...foreign, method: 'HEAD', route: '/health/ready' })).toBeUndefined();
  });

  it.each(['GET', 'HEAD'])(
    'refuses %s /v1/execute and /v1/execute/{database} from another site',
    (method) => {
      expect(judge({ method, route: '/v1/execute', origin: 'http://evil.example' })).toBeDefined();
      expect(
        judge({ method, route: '/v1/execute/:database', secFetchSite: 'cross-site' }),
      ).toBeDefined();
    },
  );

  it.each(['POST', 'PUT', 'PATCH', 'DELETE'])(
    'refuses %s from another site on any path',
    (method) => {
      expect(judge({ method, route: '/v1/login', secFetchSite: 'cross-site' })).toBeDefined();
      expect(judge({ method, route: '/admin/queues/api/*', origin: 'null' })).toBeDefined();
    },
  );
});

describe(`${crossSite.name}, as a gate`, () => {
  let app: FastifyInstance;
  const parsed: string[] = [];
  const handled: string[] = [];

  beforeAll(async () => {
    app = Fastify();
    installRequestGates(app, { allowedHosts: 'every' });
    app.addContentTypeParser('text/plain', { parseAs: 'string' }, (_request, body, done) => {
      parsed.push(body as string);
      done(null, body);
    });
    app.get('/v1/info', () => ({ ok: true }));
    for (const url of ['/v1/execute', '/v1/execute/:database']) {
      app.get(url, (request) => {
        handled.push(request.url);
        return { ran: true };
      });
      app.post(url, (request) => {
        handled.push(request.url);
        return { ran: true };
      });
    }
    // Like the queue dashboard: an encapsulated plugin registered after the check.
    await app.register(
      (scope, _options, done) => {
        scope.put('/api/pause', () => ({ paused: true }));
        done();
      },
      { prefix: '/admin/queues' },
    );
    await app.ready();
  });

  afterAll(() => app.close());

  beforeEach(() => {
    parsed.length = 0;
    handled.length = 0;
  });

  it('answers a cross-site POST with 403 in the envelope, before the body is parsed', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/execute',
      headers: { origin: 'http://evil.example', 'content-type': 'text/plain' },
      payload: "insert into t values ('x')",
    });
    expect(res.statusCode).toBe(403);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.json()).toEqual({
      status: {
        reason: expect.stringMatching(/Origin http:\/\/evil\.example is not this service's origin/),
        sql_state: '42501',
        vendor_code: -703,
      },
    });
    expect(parsed).toEqual([]);
    expect(handled).toEqual([]);
  });

  it('lets a same-origin POST through to its parser and handler', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/execute',
      headers: {
        host: 'api.example:8080',
        origin: 'http://api.example:8080',
        'sec-fetch-site': 'same-origin',
        'content-type': 'text/plain',
      },
      payload: 'select 1',
    });
    expect(res.statusCode).toBe(200);
    expect(parsed).toEqual(['select 1']);
  });

  it('judges GET by the matched route, however the path is spelt', async () => {
    for (const url of [
      '/v1/execute?statement=x',
      '/v1/execute/',
      '/v1/execute/postgres?statement=x',
    ]) {
      const res = await app.inject({
        method: 'GET',
        url,
        headers: { 'sec-fetch-site': 'cross-site' },
      });
      expect(res.statusCode).toBe(403);
    }
    const head = await app.inject({
      method: 'HEAD',
      url: '/v1/execute?statement=x',
      headers: { 'sec-fetch-site': 'cross-site' },
    });
    expect(head.statusCode).toBe(403);
    expect(handled).toEqual([]);
    const info = await app.inject({
      method: 'GET',
      url: '/v1/info',
      headers: { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' },
    });
    expect(info.statusCode).toBe(200);
  });

  it('takes the origin a TLS-terminating proxy forwarded', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/execute',
      headers: {
        host: '127.0.0.1:8080',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'sluice.example',
        origin: 'https://sluice.example',
        'content-type': 'text/plain',
      },
      payload: 'select 1',
    });
    expect(res.statusCode).toBe(200);
  });

  it('guards routes of encapsulated plugins registered after it', async () => {
    const res = await app.inject({
      method: 'PUT',
      url: '/admin/queues/api/pause',
      headers: { 'sec-fetch-site': 'same-site' },
    });
    expect(res.statusCode).toBe(403);
    expect(res.json<{ status: { vendor_code: number } }>().status.vendor_code).toBe(-703);
  });
});
