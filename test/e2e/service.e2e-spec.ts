import { randomBytes } from 'node:crypto';
import { e2eEnv, request } from './support/client';
import { runToExit } from './support/service';
import { proxyToTestDatabase } from '../support/tcp.proxy';

describe('service', () => {
  it('answers GET /v1/info without authentication', async () => {
    const res = await request(undefined, { method: 'GET', path: '/v1/info' });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      name: 'sluice',
      version: expect.any(String),
      mode: e2eEnv().mode,
      default_database: e2eEnv().defaultDatabase,
      status: { reason: 'OK', sql_state: '00000', vendor_code: 0 },
    });
  });

  it('describes every endpoint and request field in /openapi.json', async () => {
    const res = await request(undefined, { method: 'GET', path: '/openapi.json' });
    expect(res.status).toBe(200);
    expect(Object.keys(res.json.paths)).toEqual(
      expect.arrayContaining([
        '/v1/execute',
        '/v1/execute/{database}',
        '/v1/login',
        '/v1/info',
        '/v1/queries',
        '/v1/queries/{queryId}',
        '/v1/queries/{queryId}/result',
      ]),
    );
    expect(Object.keys(res.json.paths['/v1/execute'].post.responses)).toContain('202');
    const fields = Object.keys(res.json.components.schemas.ExecuteRequestDto.properties);
    expect(fields.sort()).toEqual([
      'database',
      'fetch_size',
      'format',
      'lane',
      'max_rows',
      'on_wait_timeout',
      'params',
      'resumable',
      'schema',
      'statement',
      'timeout',
      'wait_timeout',
    ]);
  });

  it.each([
    ['api', { SLUICE_JWT_SECRET: '' }, /SLUICE_JWT_SECRET/],
    ['api', { PORT: 'eighty' }, /PORT/],
    ['worker', { REDIS_URL: 'http://nope' }, /REDIS_URL/],
    ['worker', { DATABASE_URL: '' }, /DATABASE_URL/],
  ] as const)(
    'stops the %s at start-up naming a bad variable (%j)',
    async (app, override, message) => {
      const env = e2eEnv();
      const { code, output } = await runToExit(app, {
        ...env.local.env,
        REDIS_URL: env.redisUrl,
        SLUICE_JWT_SECRET: env.jwtSecret,
        SLUICE_KEY_PREFIX: env.keyPrefix,
        ...override,
      });
      expect(code).not.toBe(0);
      expect(output).toMatch(message);
    },
  );

  it('stops a worker whose PostgreSQL takes the connection and never answers, within SLUICE_PG_CONNECT_TIMEOUT_MS', async () => {
    const env = e2eEnv();
    const proxy = await proxyToTestDatabase();
    proxy.answerNothing();
    try {
      const started = Date.now();
      // Its start-up check asks PostgreSQL from a pool thread: the setting must reach the threads.
      const { code, output } = await runToExit('worker', {
        ...env.local.env,
        REDIS_URL: env.redisUrl,
        SLUICE_KEY_PREFIX: `${env.keyPrefix}-hung-${randomBytes(4).toString('hex')}`,
        SLUICE_WORKER_METRICS_PORT: '0',
        DATABASE_URL: proxy.urlFor(env.local.env.DATABASE_URL),
        SLUICE_PG_CONNECT_TIMEOUT_MS: '300',
      });
      expect(code).not.toBe(0);
      // Far less than the 10 s default.
      expect(Date.now() - started).toBeLessThan(8_000);
      expect(output).toMatch(/timeout expired/);
    } finally {
      await proxy.stop();
    }
  });
});
