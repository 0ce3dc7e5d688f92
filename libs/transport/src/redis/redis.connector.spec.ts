import { Cluster } from 'ioredis';
import { once } from 'node:events';
import { loadConfig } from '@app/config';
import { RedisSecurity } from '@test/support/redis-servers';
import { startRedisCluster } from '@test/support/redis-cluster';
import { startSentinelTopology } from '@test/support/redis-sentinel';
import { RedisClient, RedisConnector, pingEvery } from './redis.connector';

jest.setTimeout(60_000);

/** Nodes that ask a password, Sentinels that ask another, and TLS only, from a CA of the test's. */
const security: RedisSecurity = {
  password: 'node-secret',
  sentinelPassword: 'sentinel-secret',
  tls: true,
};

function connect(env: Record<string, string>): RedisClient {
  return new RedisConnector(loadConfig(env).redis!).connect({
    name: 'connector-spec',
    maxRetriesPerRequest: 0,
  });
}

/** The settings with one of them left out. */
function without(env: Record<string, string>, variable: string): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter(([name]) => name !== variable));
}

/** The first error a connection reports, as text (a cluster's carries its last node's error). */
async function firstError(client: RedisClient): Promise<string> {
  try {
    const [err] = (await once(client, 'error')) as [Error & { lastNodeError?: Error }];
    return `${err.message} ${err.lastNodeError?.message ?? ''}`;
  } finally {
    client.disconnect();
  }
}

describe('RedisConnector against a Redis Cluster with a password and TLS', () => {
  let cluster: Awaited<ReturnType<typeof startRedisCluster>>;
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, security });
  });
  afterAll(() => cluster?.stop());

  it('reaches every master with SLUICE_REDIS_PASSWORD, SLUICE_REDIS_TLS and SLUICE_REDIS_TLS_CA', async () => {
    const client = connect(cluster.env);
    try {
      for (let i = 0; i < 30; i++) await client.set(`{connector-${i}}`, String(i), 'EX', 60);
      expect(await client.get('{connector-17}')).toBe('17');
      expect(await pingEvery(client)).toBe('PONG from 3 masters');
    } finally {
      client.disconnect();
    }
  });

  it('is refused without the password', async () => {
    expect(await firstError(connect(without(cluster.env, 'SLUICE_REDIS_PASSWORD')))).toMatch(
      /NOAUTH/,
    );
  });

  it('does not trust the nodes without the certificate authority', async () => {
    expect(await firstError(connect(without(cluster.env, 'SLUICE_REDIS_TLS_CA')))).toMatch(
      /slots cache.*Connection is closed/,
    );
  });

  /** pingEvery's answer once it stops failing, within 5 s (its last failure after that). */
  async function settledPing(client: RedisClient): Promise<string> {
    const until = Date.now() + 5_000;
    for (;;) {
      try {
        return await pingEvery(client);
      } catch (err) {
        if (Date.now() > until) throw err;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  }

  // Last: it kills a master, which (no replicas) leaves the cluster down.
  it('pingEvery fails while a master is dead, also once ioredis dropped its connection', async () => {
    const client = connect(cluster.env);
    try {
      await expect(pingEvery(client)).rejects.toThrow('the Redis Cluster connection is connecting');
      await client.ping();
      // Just connected, ioredis may still replace a master's connection as it learns the slots
      // (a ping queued on the one replaced fails with 'Connection is closed.'): every master
      // answers within a few seconds.
      expect(await settledPing(client)).toBe('PONG from 3 masters');
      const [victim] = await cluster.masters();
      await cluster.kill(victim);
      const dropped = Date.now() + 10_000;
      while ((client as Cluster).nodes('master').length === 3 && Date.now() < dropped) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect((client as Cluster).nodes('master')).toHaveLength(2);
      // Gone from ioredis's nodes; or, once a refresh of the slots (which the live masters still
      // give to the dead one) made it a connection again, that connection's ping fails.
      await expect(pingEvery(client)).rejects.toThrow(
        new RegExp(`127\\.0\\.0\\.1:${victim} is gone|Connection is closed`),
      );
    } finally {
      client.disconnect();
    }
  });
});

describe('RedisConnector against Sentinels with passwords and TLS', () => {
  let topology: Awaited<ReturnType<typeof startSentinelTopology>>;
  beforeAll(async () => {
    topology = await startSentinelTopology({ security });
  });
  afterAll(() => topology?.stop());

  it('asks the Sentinels with SLUICE_REDIS_SENTINEL_PASSWORD and reaches the master they name', async () => {
    const client = connect(topology.env);
    try {
      await client.set('connector-spec', 'written', 'EX', 60);
      expect(await client.get('connector-spec')).toBe('written');
      const info = await client.info('server');
      expect(info).toContain(`tcp_port:${await topology.masterPort()}`);
      expect(await client.info('replication')).toContain('role:master');
    } finally {
      client.disconnect();
    }
  });

  it('is refused without the Sentinels’ password', async () => {
    expect(
      await firstError(connect(without(topology.env, 'SLUICE_REDIS_SENTINEL_PASSWORD'))),
    ).toMatch(/NOAUTH/);
  });

  it('does not trust the Sentinels without the certificate authority', async () => {
    // ioredis closes a connection whose certificate it cannot verify, and says no more.
    expect(await firstError(connect(without(topology.env, 'SLUICE_REDIS_TLS_CA')))).toMatch(
      /unreachable.*Connection is closed/,
    );
  });
});
