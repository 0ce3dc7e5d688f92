import Fastify from 'fastify';
import { AllowedHosts } from '@app/config';
import { ERROR_CATALOGUE } from '@app/contracts';
import { installRequestGates, requestGates } from './request.gate';

/** A request every gate would refuse: the first of them in order answers it. */
describe(installRequestGates.name, () => {
  async function app(allowedHosts: AllowedHosts) {
    const fastify = Fastify();
    installRequestGates(fastify, { allowedHosts });
    let ran = 0;
    fastify.post('/v1/execute', () => ({ ran: ++ran }));
    await fastify.ready();
    return { fastify, ran: () => ran };
  }

  const everything = {
    method: 'POST' as const,
    url: '/v1/execute?statement=%ff',
    headers: {
      host: 'attacker.example',
      authorization: 'Basic YWxpY2U6cHc=, Basic Ym9iOnB3',
      'sec-fetch-site': 'cross-site',
      'content-type': 'application/json',
    },
    payload: '{}',
  };

  it('checks headers, then the host, then the query string, then the site, and runs nothing refused', async () => {
    const { fastify, ran } = await app([{ host: '127.0.0.1' }]);
    try {
      const codes: string[] = [];
      let request = { ...everything, headers: { ...everything.headers } };
      for (const expected of [
        'INVALID_REQUEST',
        'HOST_NOT_ALLOWED',
        'INVALID_REQUEST',
        'CROSS_SITE',
      ]) {
        const res = await fastify.inject(request);
        const entry = ERROR_CATALOGUE[expected as keyof typeof ERROR_CATALOGUE];
        expect(res.statusCode).toBe(entry.http);
        const { status } = res.json<{ status: { reason: string; vendor_code: number } }>();
        expect(status.vendor_code).toBe(entry.vendorCode);
        codes.push(status.reason);
        // Take away what was refused: the next gate answers.
        if (codes.length === 1) request.headers.authorization = 'Basic YWxpY2U6cHc=';
        if (codes.length === 2) request.headers.host = '127.0.0.1';
        if (codes.length === 3) request = { ...request, url: '/v1/execute' };
      }
      expect(codes[0]).toMatch(/^ambiguous request/);
      expect(codes[2]).toMatch(/query string/);
      expect(ran()).toBe(0);
      request.headers['sec-fetch-site'] = 'same-origin';
      expect((await fastify.inject(request)).statusCode).toBe(200);
      expect(ran()).toBe(1);
    } finally {
      await fastify.close();
    }
  });

  it('has no host gate when every name is allowed', () => {
    expect(requestGates({ allowedHosts: 'every' })).toHaveLength(3);
  });
});
