import { randomBytes } from 'node:crypto';
import { e2eEnv, request } from './support/client';
import { runToExit, startProcess } from './support/service';
import { freePort } from '../support/free-port';
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
      // Its start-up check asks PostgreSQL from a pool thread: the setting must reach the threads.
      const { code, output, beyondRefused } = await runBeyondRefused(
        'worker',
        {
          ...env.local.env,
          REDIS_URL: env.redisUrl,
          SLUICE_KEY_PREFIX: `${env.keyPrefix}-hung-${randomBytes(4).toString('hex')}`,
          SLUICE_WORKER_METRICS_PORT: '0',
          DATABASE_URL: proxy.urlFor(env.local.env.DATABASE_URL),
          SLUICE_PG_CONNECT_TIMEOUT_MS: '300',
        },
        'DATABASE_URL',
      );
      expect(code).not.toBe(0);
      // Far less than the 10 s default would wait.
      expect(beyondRefused).toBeLessThan(5_000);
      expect(output).toMatch(/timeout expired/);
    } finally {
      await proxy.stop();
    }
  });

  /**
   * Runs `app` with `env` to its exit, and once more with `variable` leading to a port nothing
   * listens on (its connect refused at once): `beyondRefused` is how much longer the first ran,
   * its wait for the database without the start-up both share, which a busy machine stretches
   * to seconds.
   */
  async function runBeyondRefused(
    app: 'api' | 'worker',
    env: Record<string, string>,
    variable: string,
  ): Promise<{ code: number | null; output: string; beyondRefused: number }> {
    const closed = new URL(env[variable]);
    closed.port = String(await freePort());
    const timed = async (runEnv: Record<string, string>) => {
      const started = Date.now();
      const exit = await runToExit(app, runEnv);
      return { ...exit, ms: Date.now() - started };
    };
    const refused = await timed({ ...env, [variable]: closed.toString() });
    expect(refused.code).not.toBe(0);
    expect(refused.output).toMatch(/ECONNREFUSED/);
    const { code, output, ms } = await timed(env);
    return { code, output, beyondRefused: ms - refused.ms };
  }

  /** An api of its own whose `variable` leads to a PostgreSQL that takes connections, never answers. */
  async function apiWithHungDatabase(
    variable: 'SLUICE_METADATA_DATABASE_URL' | 'DATABASE_URL',
    run: (env: Record<string, string>) => Promise<void>,
  ): Promise<void> {
    const env = e2eEnv();
    const proxy = await proxyToTestDatabase();
    proxy.answerNothing();
    try {
      await run({
        ...env.local.env,
        REDIS_URL: env.redisUrl,
        SLUICE_JWT_SECRET: env.jwtSecret,
        SLUICE_KEY_PREFIX: `${env.keyPrefix}-hung-${randomBytes(4).toString('hex')}`,
        PORT: '0',
        [variable]: proxy.urlFor(env.local.env[variable]),
        SLUICE_PG_CONNECT_TIMEOUT_MS: '300',
      });
    } finally {
      await proxy.stop();
    }
  }

  it('stops an api whose metadata database takes the connection and never answers, within SLUICE_PG_CONNECT_TIMEOUT_MS', async () => {
    await apiWithHungDatabase('SLUICE_METADATA_DATABASE_URL', async (env) => {
      const { code, output, beyondRefused } = await runBeyondRefused(
        'api',
        env,
        'SLUICE_METADATA_DATABASE_URL',
      );
      expect(code).not.toBe(0);
      expect(beyondRefused).toBeLessThan(5_000);
      expect(output).toMatch(/timeout expired/);
    });
  });

  it('serves, and says it could not check the roles, when DATABASE_URL never answers (within SLUICE_PG_CONNECT_TIMEOUT_MS)', async () => {
    // The api runs no statement: it starts without PostgreSQL, and its check of the roles fails.
    await apiWithHungDatabase('DATABASE_URL', async (env) => {
      const api = startProcess('api', env);
      try {
        const started = Date.now();
        const said = /could not check the roles: timeout expired/;
        while (!said.test(api.output()) && Date.now() - started < 8_000) {
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        expect(api.output()).toMatch(said);
        expect(api.child.exitCode).toBeNull();
      } finally {
        await api.stop();
      }
    });
  });
});
