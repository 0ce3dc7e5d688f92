import pino from 'pino';
import { Writable } from 'node:stream';
import { loadConfig } from '@app/config';
import { apiLogOptions, pathOf } from './log.options';

/** A pino logger with the api's settings that writes its lines here. */
function capture(level = 'info') {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  const { redact, serializers } = apiLogOptions(loadConfig({ LOG_LEVEL: level }));
  return { logger: pino({ level, redact, serializers }, stream), lines };
}

describe('apiLogOptions', () => {
  it('redacts credentials in request headers', () => {
    const { logger, lines } = capture();
    logger.info({
      req: {
        id: 1,
        method: 'POST',
        url: '/v1/execute',
        headers: { authorization: 'Bearer abc.def.ghi', cookie: 'sid=1', accept: '*/*' },
      },
    });
    const req = lines[0].req as { headers: Record<string, string> };
    expect(req.headers).toEqual({
      authorization: '[redacted]',
      cookie: '[redacted]',
      accept: '*/*',
    });
  });

  it('drops query strings from logged URLs: they may carry a statement and its params', () => {
    const { logger, lines } = capture();
    logger.info({
      req: {
        id: 1,
        method: 'GET',
        url: '/v1/execute?statement=x&params={"p":"s3cret"}',
        headers: {},
      },
    });
    expect((lines[0].req as { url: string }).url).toBe('/v1/execute');
    expect(JSON.stringify(lines)).not.toContain('s3cret');
  });

  it('redacts passwords, tokens and parameter values wherever a line carries them', () => {
    const { logger, lines } = capture();
    logger.info({
      password: 'pw1',
      body: { password: 'pw2', params: { p: 'v' }, access_token: 't' },
      job: { values: ['v1'] },
    });
    expect(lines[0]).toMatchObject({
      password: '[redacted]',
      body: { password: '[redacted]', params: '[redacted]', access_token: '[redacted]' },
      job: { values: '[redacted]' },
    });
  });

  it('logs at LOG_LEVEL', () => {
    expect(apiLogOptions(loadConfig({ LOG_LEVEL: 'debug' })).level).toBe('debug');
    expect(apiLogOptions(loadConfig({})).level).toBe('info');
  });
});

describe(pathOf.name, () => {
  it('keeps the path and drops the query string', () => {
    expect(pathOf('/v1/execute?statement=select%201')).toBe('/v1/execute');
    expect(pathOf('/health/ready')).toBe('/health/ready');
    expect(pathOf(undefined)).toBe('');
  });
});
