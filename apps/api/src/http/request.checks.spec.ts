import Fastify from 'fastify';
import { PassThrough, Readable } from 'node:stream';
import { SluiceError } from '@app/contracts';
import {
  BodyCheck,
  ReceivingBudget,
  UNCOUNTED_BYTES,
  authorizationProblem,
  headerAmbiguity,
  ambiguousHeaders,
  undecodableQueryString,
  queryEncodingProblem,
  schemeAndCredential,
} from './request.checks';
import { installRequestGates } from './request.gate';

async function run(chunks: Buffer[], budget?: ReceivingBudget): Promise<Buffer> {
  const out: Buffer[] = [];
  const check = Readable.from(chunks).pipe(new BodyCheck(budget));
  for await (const chunk of check) out.push(chunk as Buffer);
  return Buffer.concat(out);
}

async function failure(chunks: Buffer[], budget?: ReceivingBudget): Promise<SluiceError> {
  try {
    await run(chunks, budget);
  } catch (err) {
    return err as SluiceError;
  }
  throw new Error('expected the check to fail');
}

describe(BodyCheck.name, () => {
  it('passes valid UTF-8 through unchanged, also when a character is split across chunks', async () => {
    const text = Buffer.from('{"statement":"select \'São Paulo\' — 東京"}');
    const cut = text.indexOf(0xe6) + 1;
    expect(await run([text.subarray(0, cut), text.subarray(cut)])).toEqual(text);
  });

  it('refuses invalid UTF-8 with a 400', async () => {
    const err = await failure([Buffer.from([0x7b, 0xff, 0xfe, 0x7d])]);
    expect(err.code).toBe('INVALID_REQUEST');
    expect(err.message).toMatch(/UTF-8/);
  });

  it('refuses a body that ends inside a multi-byte character', async () => {
    expect((await failure([Buffer.from([0x22, 0xe6, 0x9d])])).message).toMatch(/UTF-8/);
  });
});

describe(ReceivingBudget.name, () => {
  /** A body that has sent `bytes` and not ended: its check, and the stream it arrives on. */
  function arriving(
    budget: ReceivingBudget,
    bytes: number,
  ): { check: BodyCheck; body: PassThrough } {
    const body = new PassThrough();
    const check = new BodyCheck(budget);
    // The parser's part: it hears every error of the check.
    check.on('error', () => undefined);
    body.pipe(check);
    check.resume();
    body.write(Buffer.alloc(bytes, 0x61));
    return { check, body };
  }

  const tick = () => new Promise((resolve) => setImmediate(resolve));

  it('refuses a large body with 503 while others arriving hold the budget, and frees it as each ends or fails', async () => {
    const budget = new ReceivingBudget(1000);
    // What each holds past its first UNCOUNTED_BYTES counts: 600 and 300.
    const first = arriving(budget, UNCOUNTED_BYTES + 600);
    const second = arriving(budget, UNCOUNTED_BYTES + 300);
    await tick();
    const err = await failure([Buffer.alloc(UNCOUNTED_BYTES), Buffer.alloc(200)], budget);
    expect(err.code).toBe('UNAVAILABLE');
    expect(err.headers).toEqual({ 'retry-after': '1' });
    // A body within UNCOUNTED_BYTES goes through all the same.
    const small = await run([Buffer.alloc(UNCOUNTED_BYTES - 1), Buffer.alloc(1)], budget);
    expect(small.length).toBe(UNCOUNTED_BYTES);
    // The first ends whole, the second's client goes away: both give their bytes back.
    first.body.end();
    second.check.destroy(new Error('request body ended early'));
    await tick();
    const whole = await run([Buffer.alloc(UNCOUNTED_BYTES + 1000)], budget);
    expect(whole.length).toBe(UNCOUNTED_BYTES + 1000);
    expect(budget.take(1000)).toBe(true);
  });
});

describe(schemeAndCredential.name, () => {
  // Node hands header values over with the white space at their ends dropped.
  it('splits every value as the regular expression it stands for', () => {
    const parts = [
      'Bearer',
      'a',
      'b.c',
      '=',
      ',',
      ' ',
      '  ',
      '\t',
      '\n',
      '\u00a0',
      '\u2028',
      '\ufeff',
      'x y',
    ];
    let state = 7;
    const random = () => (state = (state * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
    for (let i = 0; i < 20_000; i++) {
      let value = '';
      for (let n = Math.floor(random() * 8); n > 0; n--)
        value += parts[Math.floor(random() * parts.length)];
      value = value.trimEnd();
      const match = /^\s*(\S+)(?:\s+(.+?))?\s*$/s.exec(value);
      expect({ value, split: schemeAndCredential(value) }).toEqual({
        value,
        split: [match?.[1], match?.[2]],
      });
    }
  });

  it('finds no credential in white space after the scheme', () => {
    expect(schemeAndCredential(' Bearer \t ')).toEqual(['Bearer', undefined]);
    expect(schemeAndCredential(' \n ')).toEqual([undefined, undefined]);
  });
});

describe(authorizationProblem.name, () => {
  it.each([
    'Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln',
    'bearer abc.def',
    'Basic YWxpY2U6cHc=',
    'BASIC YWxpY2U6cHc=',
    '  Bearer   abc  ',
    // Schemes Sluice does not take are the guards' to refuse (401), lists and all.
    'Digest username="a", realm="b"',
    'Negotiate',
    // No credential: a missing token, not two.
    'Bearer',
    'Basic ',
  ])('passes %p', (value) => {
    expect(authorizationProblem(value)).toBeUndefined();
  });

  it.each([
    'Bearer good.token.sig, Bearer forged',
    'Bearer a,b',
    'Basic YWxpY2U6cHc=, Basic Ym9iOnB3',
    'Basic YWxpY2U6cHc=,',
    'Bearer good.token.sig forged',
    'Bearer a\tb',
  ])('refuses %p: it is not exactly one credential', (value) => {
    expect(authorizationProblem(value)).toMatch(/exactly one credential/);
  });

  it("says that a login's JSON answer sent as the token is not a token, not that it is ambiguous", () => {
    const failedLogin =
      'Bearer {"status":{"reason":"invalid username or password","sql_state":"28000","vendor_code":-301}}';
    expect(authorizationProblem(failedLogin)).toBe(
      'the Authorization header holds Bearer followed by text that is not a token (it starts with "{", like a JSON or HTML answer: did the login fail?); it must be "Bearer <credential>"',
    );
  });

  it.each([
    ['Bearer a, Bearer b', /it holds a list \(a comma after Bearer\)$/],
    ['Bearer good.token.sig forged', /it holds more than one word after Bearer$/],
    [
      'Bearer a;b',
      /^the Authorization header holds Bearer followed by text that is not a token \(a token holds only/,
    ],
    [
      'Basic <html>',
      /^the Authorization header holds Basic followed by text that is not a token \(it starts with "<"/,
    ],
  ])('says what it found in %p', (value, reason) => {
    expect(authorizationProblem(value)).toMatch(reason);
  });
});

describe(headerAmbiguity.name, () => {
  const base = ['Host', '127.0.0.1', 'Content-Type', 'application/json'];

  it('passes one of each, and repeats of fields that are lists', () => {
    expect(headerAmbiguity([...base, 'Authorization', 'Bearer x'])).toBeUndefined();
    expect(headerAmbiguity([...base, 'Accept', 'a/b', 'Accept', 'c/d'])).toBeUndefined();
    expect(headerAmbiguity([...base, 'Cookie', 'a=1', 'Cookie', 'b=2'])).toBeUndefined();
  });

  it.each([
    ['Authorization', 'authorization'],
    ['Content-Type', 'content-type'],
    ['Host', 'HOST'],
    ['Content-Length', 'content-length'],
  ])('refuses %s twice, whatever the letter case', (first, second) => {
    const lines = [...base.slice(4), first, 'Bearer a', second, 'Bearer b'];
    expect(headerAmbiguity(lines)).toBe(`ambiguous request: more than one ${first} header`);
  });

  it('refuses an Authorization that holds two credentials joined by a proxy', () => {
    expect(headerAmbiguity([...base, 'Authorization', 'Bearer a, Bearer b'])).toMatch(
      /^ambiguous request: the Authorization header must hold exactly one credential/,
    );
  });
});

describe(`${ambiguousHeaders.name}, as a gate`, () => {
  it('answers an ambiguous request with 400 in the envelope before the route runs', async () => {
    const app = Fastify();
    installRequestGates(app, { allowedHosts: 'every' });
    let ran = 0;
    app.get('/v1/info', () => ({ ran: ++ran }));
    try {
      const res = await app.inject({
        method: 'GET',
        url: '/v1/info',
        headers: { authorization: 'Basic YWxpY2U6cHc=, Basic Ym9iOnB3' },
      });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        status: {
          reason: expect.stringMatching(/^ambiguous request/),
          sql_state: '08P01',
          vendor_code: -100,
        },
      });
      expect(ran).toBe(0);
      expect((await app.inject({ method: 'GET', url: '/v1/info' })).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });
});

describe(queryEncodingProblem.name, () => {
  it.each([
    '/v1/execute',
    '/v1/execute?statement=select%201&format=array',
    '/v1/execute?statement=select+%27S%C3%A3o%27&x=%25ff',
    '/a%ff/b?x=1',
  ])('passes %s', (url) => {
    expect(queryEncodingProblem(url)).toBeUndefined();
  });

  it.each([
    '/v1/execute?statement=%ff',
    '/v1/execute?statement=select%201&format=array%zz',
    '/v1/execute?%e2%82=1',
    '/v1/execute?statement=a%',
    '/v1/execute?statement=%ed%a0%80',
    '/v1/execute#x=%ff',
  ])('refuses %s', (url) => {
    expect(queryEncodingProblem(url)).toMatch(/not valid percent-encoded UTF-8/);
  });
});

describe(`${undecodableQueryString.name}, as a gate`, () => {
  it('answers a query string that does not decode with 400 in the envelope, the route not run', async () => {
    const app = Fastify();
    installRequestGates(app, { allowedHosts: 'every' });
    const seen: unknown[] = [];
    app.get('/v1/execute', (request) => {
      seen.push(request.query);
      return { ok: true };
    });
    try {
      const res = await app.inject({ method: 'GET', url: '/v1/execute?statement=select+1+--%ff' });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        status: {
          reason: expect.stringMatching(/query string/),
          sql_state: '08P01',
          vendor_code: -100,
        },
      });
      expect(seen).toEqual([]);
      const ok = await app.inject({ method: 'GET', url: '/v1/execute?statement=select%201' });
      expect(ok.statusCode).toBe(200);
      expect(seen).toEqual([{ statement: 'select 1' }]);
    } finally {
      await app.close();
    }
  });
});
