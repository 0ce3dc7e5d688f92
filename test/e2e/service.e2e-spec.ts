import { e2eEnv, request } from './support/client';
import { runToExit } from './support/service';

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
});
