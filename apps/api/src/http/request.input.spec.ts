import Fastify, { FastifyInstance } from 'fastify';
import { AddressInfo, connect } from 'node:net';
import { toEnvelope } from './error.envelope';
import { installRequestInput } from './request.input';

const LIMITS = { maxBodyBytes: 100_000, maxJsonDepth: 8, maxReceivingBytes: 100_000 };

/** An app with the request input installed, errors answered in the envelope, and echo routes. */
function echoApp(): FastifyInstance {
  const app = Fastify({ bodyLimit: LIMITS.maxBodyBytes });
  installRequestInput(app, LIMITS);
  app.setErrorHandler((err, _request, reply) => {
    const { httpStatus, body } = toEnvelope(err);
    void reply.code(httpStatus).send(body);
  });
  app.get('/echo', (request) => ({ query: request.query }));
  app.post('/echo', (request) => ({ body: request.body }));
  return app;
}

describe('request input', () => {
  const post = (app: FastifyInstance, payload: string, type = 'application/json', url = '/echo') =>
    app.inject({ method: 'POST', url, payload, headers: { 'content-type': type } });

  it('parses a JSON body, and refuses one nested too deep (413), with a key twice or a number a double rounds (400)', async () => {
    const app = echoApp();
    expect((await post(app, '{"statement":"select 1"}')).json()).toEqual({
      body: { statement: 'select 1' },
    });
    const deep = await post(app, `{"p":${'['.repeat(9)}${']'.repeat(9)}}`);
    expect(deep.statusCode).toBe(413);
    expect(deep.json().status.reason).toMatch(/nested deeper than 8/);
    const twice = await post(app, '{"statement":"select 1","statement":"select 2"}');
    expect(twice.statusCode).toBe(400);
    expect(twice.json().status.reason).toBe('the JSON key "statement" is given twice');
    const inexact = await post(app, '{"n":9007199254740993}');
    expect(inexact.statusCode).toBe(400);
    expect(inexact.json().status.reason).toMatch(/more precision or range than a double/);
  });

  it('holds the params of a query string to the checks of a JSON body, before any route runs', async () => {
    const app = echoApp();
    const get = (params: string) =>
      app.inject({ method: 'GET', url: `/echo?params=${encodeURIComponent(params)}` });
    expect((await get('{"a":1}')).statusCode).toBe(200);
    expect((await get('{"a":1,"a":2}')).json().status.reason).toBe(
      'the JSON key "a" is given twice',
    );
    expect((await get('{"a":9007199254740993}')).statusCode).toBe(400);
    expect((await get(`{"p":${'['.repeat(9)}${']'.repeat(9)}}`)).statusCode).toBe(413);
    const plain = await post(
      app,
      'select 1',
      'text/plain',
      '/echo?params=%7B%22a%22%3A1%2C%22a%22%3A2%7D',
    );
    expect(plain.statusCode).toBe(400);
  });

  it('takes a text/plain body as the statement, its options from the query string', async () => {
    const app = echoApp();
    const res = await post(
      app,
      'select {a}',
      'text/plain',
      '/echo?max_rows=2&params=%7B%22a%22%3A1%7D',
    );
    expect(res.json()).toEqual({
      body: { statement: 'select {a}', max_rows: 2, params: { a: 1 } },
    });
    const twice = await post(app, 'select 1', 'text/plain', '/echo?statement=select%202');
    expect(twice.statusCode).toBe(400);
  });

  it('refuses other media types (415) and bodies in another charset (415)', async () => {
    const app = echoApp();
    expect((await post(app, 'a=1', 'application/x-www-form-urlencoded')).statusCode).toBe(415);
    expect((await post(app, '{}', 'application/json; charset=latin1')).statusCode).toBe(415);
    expect((await post(app, 'select 1', 'text/plain; charset=utf-8')).statusCode).toBe(200);
  });
});

describe(installRequestInput.name, () => {
  /** Sends `head` and `body` on a connection of its own; the status line of the answer. */
  function send(port: number, head: string, body: Buffer): Promise<string> {
    return new Promise((resolve) => {
      const socket = connect(port, '127.0.0.1');
      let answer = '';
      socket.on('data', (data) => {
        answer += data.toString('latin1');
        if (answer.includes('\r\n')) socket.destroy();
      });
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(answer.split('\r\n')[0]));
      socket.write(head);
      socket.end(body);
    });
  }

  const json = (bytes: number) => Buffer.from(`{"a":"${'b'.repeat(bytes - 8)}"}`);
  const headOf = (method: string, body: Buffer) =>
    `${method} /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${body.length}\r\n\r\n`;

  it.each(['GET', 'PROPFIND'])(
    'gives back the budget of bodies that %s requests send and no parser reads, and never fails on their errors',
    async (method) => {
      const app = Fastify({ bodyLimit: 100_000 });
      installRequestInput(app, LIMITS);
      app.get('/echo', () => ({ ok: true }));
      app.post('/echo', (request) => ({ length: JSON.stringify(request.body).length }));
      await app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = app.server.address() as AddressInfo;
      try {
        // Each body arrives whole into a check nobody reads: bigger than its buffer, smaller
        // than its buffer and the pipe's together.
        for (let i = 0; i < 10; i++) {
          expect(await send(port, headOf(method, json(24_000)), json(24_000))).toMatch(
            / (200|404) /,
          );
        }
        const bad = Buffer.concat([json(30_000), Buffer.from([0xff, 0xfe])]);
        expect(await send(port, headOf(method, bad), bad)).toMatch(/ (200|404) /);
        const deep = Buffer.from(`${'['.repeat(30_000)}`);
        expect(await send(port, headOf(method, deep), deep)).toMatch(/ (200|404) /);
        await new Promise((resolve) => setTimeout(resolve, 100));
        // Still up, and the whole budget free for one large body.
        expect(await send(port, headOf('POST', json(90_000)), json(90_000))).toMatch(/ 200 /);
      } finally {
        await app.close();
      }
    },
  );
});
