import { AllowedHosts, LOOPBACK_HOSTS } from '@app/config';
import { ERROR_CATALOGUE } from '@app/contracts';
import Fastify from 'fastify';
import { HostRequest, allowedHostsWarning, hostRefusal, unlistedHost } from './host.check';
import { installRequestGates } from './request.gate';

const LISTED: AllowedHosts = [{ host: 'sluice.example.com' }, { host: '10.0.0.5', port: 8080 }];

function request(overrides: Partial<HostRequest>): HostRequest {
  return {
    method: 'POST',
    route: '/v1/execute',
    host: 'sluice.example.com',
    forwardedHost: undefined,
    ...overrides,
  };
}

describe(hostRefusal.name, () => {
  it.each([
    'sluice.example.com',
    'sluice.example.com:8080',
    'SLUICE.Example.COM:443',
    'sluice.example.com.',
    'sluice.example.com.:8080',
    '10.0.0.5:8080',
  ])('passes Host %j', (host) => {
    expect(hostRefusal(request({ host }), LISTED)).toBeUndefined();
  });

  it.each([
    ['attacker.example:8080', /^Host "attacker.example:8080" is not allowed: /],
    ['www.sluice.example.com', /^Host "www.sluice.example.com" is not allowed/],
    ['sluice.example.com.attacker.example', /is not allowed/],
    ['10.0.0.5', /^Host "10.0.0.5" is not allowed/],
    ['10.0.0.5:8081', /^Host "10.0.0.5:8081" is not allowed/],
    ['sluice.example.com..', /is not allowed/],
    ['user@sluice.example.com', /is not allowed/],
    ['sluice.example.com:8080:1', /is not allowed/],
  ])('refuses Host %j, naming it and SLUICE_ALLOWED_HOSTS', (host, reason) => {
    const refusal = hostRefusal(request({ host }), LISTED);
    expect(refusal).toMatch(reason);
    expect(refusal).toMatch(/SLUICE_ALLOWED_HOSTS/);
  });

  it.each([undefined, '', ' '])(
    'refuses a request with no Host (%j), as HTTP/1.0 allows',
    (host) => {
      expect(hostRefusal(request({ host }), LISTED)).toMatch(/^the request has no Host header/);
    },
  );

  it('quotes at most 100 characters of the Host back', () => {
    const host = `${'a'.repeat(200)}.example`;
    expect(hostRefusal(request({ host }), LISTED)).toContain(`"${'a'.repeat(100)}…"`);
  });

  it('refuses an X-Forwarded-Host not on the list, any of its values', () => {
    expect(hostRefusal(request({ forwardedHost: 'sluice.example.com' }), LISTED)).toBeUndefined();
    expect(hostRefusal(request({ forwardedHost: 'attacker.example' }), LISTED)).toMatch(
      /^X-Forwarded-Host "attacker.example" is not allowed/,
    );
    expect(
      hostRefusal(request({ forwardedHost: 'sluice.example.com, attacker.example' }), LISTED),
    ).toMatch(/^X-Forwarded-Host "attacker.example" is not allowed/);
  });

  it.each([
    ['GET', '/health/live'],
    ['HEAD', '/health/ready'],
    ['get', '/metrics'],
  ])('answers %s %s whatever the Host: probes and scrapers use addresses', (method, route) => {
    for (const host of ['10.1.2.3:8080', undefined, 'attacker.example']) {
      expect(hostRefusal(request({ method, route, host }), LISTED)).toBeUndefined();
    }
  });

  it.each([
    ['POST', '/metrics'],
    ['GET', '/v1/info'],
    ['GET', '/admin'],
    ['GET', '/docs'],
    ['GET', '/health/live/x'],
  ])('checks %s %s', (method, route) => {
    expect(hostRefusal(request({ method, route, host: 'attacker.example' }), LISTED)).toMatch(
      /is not allowed/,
    );
  });

  it('passes every Host with * or without the setting in cluster mode', () => {
    for (const allowed of ['every', 'unset'] as const) {
      expect(hostRefusal(request({ host: 'attacker.example' }), allowed)).toBeUndefined();
      expect(hostRefusal(request({ host: undefined }), allowed)).toBeUndefined();
    }
  });

  it('passes the loopback names on any port, and only them, by default in standalone mode', () => {
    for (const host of ['localhost:8080', '127.0.0.1', '[::1]:1', 'LOCALHOST.:9']) {
      expect(hostRefusal(request({ host }), LOOPBACK_HOSTS)).toBeUndefined();
    }
    for (const host of ['attacker.example:8080', '127.0.0.2', '[::2]', 'localhost.attacker']) {
      expect(hostRefusal(request({ host }), LOOPBACK_HOSTS)).toMatch(/is not allowed/);
    }
  });
});

describe(allowedHostsWarning.name, () => {
  it('warns only when the setting is left out in cluster mode, naming it and why', () => {
    expect(allowedHostsWarning('unset')).toMatch(
      /^SLUICE_ALLOWED_HOSTS is not set: .*DNS rebinding/,
    );
    expect(allowedHostsWarning('every')).toBeUndefined();
    expect(allowedHostsWarning(LOOPBACK_HOSTS)).toBeUndefined();
  });
});

describe(`${unlistedHost.name}, as a gate`, () => {
  async function app(allowed: AllowedHosts) {
    const fastify = Fastify();
    installRequestGates(fastify, { allowedHosts: allowed });
    fastify.get('/v1/info', () => ({ ok: true }));
    fastify.get('/health/live', () => ({ live: true }));
    await fastify.ready();
    return fastify;
  }

  it('answers 421 in the envelope (-704) before the route, and lets listed hosts through', async () => {
    const fastify = await app(LISTED);
    const refused = await fastify.inject({
      url: '/v1/info',
      headers: { host: 'attacker.example:8080' },
    });
    const entry = ERROR_CATALOGUE.HOST_NOT_ALLOWED;
    expect(refused.statusCode).toBe(421);
    expect(refused.json()).toEqual({
      status: {
        reason: expect.stringMatching(/^Host "attacker.example:8080" is not allowed/),
        sql_state: entry.sqlState,
        vendor_code: -704,
      },
    });
    // A path no route serves is refused as well, before the 404.
    const unrouted = await fastify.inject({ url: '/nope', headers: { host: 'attacker.example' } });
    expect(unrouted.statusCode).toBe(421);
    const passed = await fastify.inject({
      url: '/v1/info',
      headers: { host: 'sluice.example.com' },
    });
    expect(passed.statusCode).toBe(200);
    const probe = await fastify.inject({ url: '/health/live', headers: { host: '10.9.8.7' } });
    expect(probe.statusCode).toBe(200);
    await fastify.close();
  });

  it('installs nothing for every host', async () => {
    const fastify = await app('unset');
    const res = await fastify.inject({ url: '/v1/info', headers: { host: 'attacker.example' } });
    expect(res.statusCode).toBe(200);
    await fastify.close();
  });
});
