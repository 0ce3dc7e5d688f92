import { ConfigError, loadConfig } from './sluice.config';

describe('Redis settings', () => {
  it('reads one node from REDIS_URL', () => {
    expect(loadConfig({ REDIS_URL: 'redis://r.example:6380/2' }).redis).toEqual({
      mode: 'single',
      url: 'redis://r.example:6380/2',
    });
  });

  it('reads Redis Cluster seed nodes', () => {
    const { redis } = loadConfig({
      SLUICE_REDIS_CLUSTER_NODES: '127.0.0.1:7301, r2.example:7302,[::1]:7303',
      SLUICE_REDIS_PASSWORD: 'pw',
      SLUICE_REDIS_TLS: 'true',
    });
    expect(redis).toEqual({
      mode: 'cluster',
      nodes: [
        { host: '127.0.0.1', port: 7301 },
        { host: 'r2.example', port: 7302 },
        { host: '::1', port: 7303 },
      ],
      password: 'pw',
      tls: true,
    });
  });

  it('reads Sentinels and the master name, mymaster by default', () => {
    expect(loadConfig({ SLUICE_REDIS_SENTINELS: 's1:26379,s2:26380' }).redis).toEqual({
      mode: 'sentinel',
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26380 },
      ],
      name: 'mymaster',
      tls: false,
    });
    const named = loadConfig({
      SLUICE_REDIS_SENTINELS: 's1:26379',
      SLUICE_REDIS_SENTINEL_NAME: 'sluice',
      SLUICE_REDIS_SENTINEL_PASSWORD: 'spw',
    }).redis;
    expect(named).toMatchObject({ name: 'sluice', sentinelPassword: 'spw' });
  });

  it('reads the certificate authorities for TLS from a file that must be readable', () => {
    const { redis } = loadConfig({
      SLUICE_REDIS_SENTINELS: 's1:26379',
      SLUICE_REDIS_TLS: 'true',
      SLUICE_REDIS_TLS_CA: __filename,
    });
    expect(redis).toMatchObject({ mode: 'sentinel', tls: true, tlsCa: __filename });
  });

  it.each([
    [{ REDIS_URL: 'redis://a:1', SLUICE_REDIS_CLUSTER_NODES: 'b:2' }, 'SLUICE_REDIS_CLUSTER_NODES'],
    [
      { SLUICE_REDIS_CLUSTER_NODES: 'b:2', SLUICE_REDIS_SENTINELS: 'c:3' },
      'SLUICE_REDIS_SENTINELS',
    ],
    [{ SLUICE_REDIS_CLUSTER_NODES: 'b' }, 'SLUICE_REDIS_CLUSTER_NODES'],
    [{ SLUICE_REDIS_CLUSTER_NODES: 'b:70000' }, 'SLUICE_REDIS_CLUSTER_NODES'],
    [{ SLUICE_REDIS_SENTINELS: 'c:3,' }, 'SLUICE_REDIS_SENTINELS'],
    [{ SLUICE_REDIS_SENTINEL_NAME: 'x', REDIS_URL: 'redis://a:1' }, 'SLUICE_REDIS_SENTINEL_NAME'],
    [{ SLUICE_REDIS_PASSWORD: 'x', REDIS_URL: 'redis://a:1' }, 'SLUICE_REDIS_PASSWORD'],
    [{ SLUICE_REDIS_TLS: 'true' }, 'SLUICE_REDIS_TLS'],
    [{ SLUICE_REDIS_TLS: 'yes', SLUICE_REDIS_CLUSTER_NODES: 'b:2' }, 'SLUICE_REDIS_TLS'],
    [{ SLUICE_REDIS_TLS_CA: __filename, SLUICE_REDIS_CLUSTER_NODES: 'b:2' }, 'SLUICE_REDIS_TLS_CA'],
    [
      {
        SLUICE_REDIS_TLS: 'true',
        SLUICE_REDIS_TLS_CA: '/nonexistent/ca.pem',
        SLUICE_REDIS_CLUSTER_NODES: 'b:2',
      },
      'SLUICE_REDIS_TLS_CA',
    ],
  ])('stops start-up on %j, naming %s', (env, variable) => {
    let thrown: unknown;
    try {
      loadConfig(env);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).variable).toBe(variable);
  });
});
