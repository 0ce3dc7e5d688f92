import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RedisSecurity, RedisServers, redisCli, securityEnv, waitFor } from './redis-servers';
import { freePort } from './free-port';

/** A Redis master, its replica and three Sentinels a test started on loopback. */
export interface SentinelTopology {
  /** The master group's name, for SLUICE_REDIS_SENTINEL_NAME. */
  name: string;
  /** 'host:port,host:port,host:port' of the three sentinels, for SLUICE_REDIS_SENTINELS. */
  sentinels: string;
  /** The environment that points a Sluice process at it (SLUICE_REDIS_SENTINELS, _NAME). */
  env: Record<string, string>;
  /** Ports of the master and the replica it started with (the roles may have changed since). */
  dataPorts: number[];
  /** Port of the current master, as the sentinels see it. */
  masterPort(): Promise<number>;
  /** SIGKILLs the redis-server listening on that port (a crash, not a shutdown). */
  kill(port: number): Promise<void>;
  /** What the servers and Sentinels last logged: to explain a test that failed. */
  diagnose(): Promise<string>;
  /** Stops every process it started and removes its files; safe to call twice. */
  stop(): Promise<void>;
}

const NAME = 'sluice-master';

/**
 * One master, one replica and three Sentinels (quorum 2) that take the master for down after
 * `downAfterMs` and promote the replica; resolves once the replica has the master's data and
 * every Sentinel knows it.
 */
export async function startSentinelTopology(
  options: { downAfterMs?: number; failoverTimeoutMs?: number; security?: RedisSecurity } = {},
): Promise<SentinelTopology> {
  const { downAfterMs = 1000, failoverTimeoutMs = 3000, security = {} } = options;
  const servers = new RedisServers(security);
  const sentinelPorts: number[] = [];
  const master = await freePort();
  const replica = await freePort();
  try {
    await servers.start(master);
    await servers.start(replica, ['--replicaof', '127.0.0.1', String(master)]);
    await waitFor('the replica in sync', async () =>
      (await redisCli(replica, 'info', 'replication')).includes('master_link_status:up'),
    );
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      sentinelPorts.push(port);
      // A Sentinel rewrites its configuration file: each has one of its own.
      const conf = join(servers.dir, `sentinel-${port}.conf`);
      writeFileSync(
        conf,
        [
          `sentinel monitor ${NAME} 127.0.0.1 ${master} 2`,
          `sentinel down-after-milliseconds ${NAME} ${downAfterMs}`,
          `sentinel failover-timeout ${NAME} ${failoverTimeoutMs}`,
          ...(security.password ? [`sentinel auth-pass ${NAME} ${security.password}`] : []),
          // What a Sentinel tells the others with, when they ask for a password.
          ...(security.sentinelPassword
            ? [`sentinel sentinel-pass ${security.sentinelPassword}`]
            : []),
          '',
        ].join('\n'),
      );
      await servers.start(port, [conf, '--sentinel'], 'sentinel');
    }
    for (const port of sentinelPorts) {
      await waitFor(`sentinel ${port} to see the replica and the other sentinels`, async () => {
        const [replicas, others] = await Promise.all([
          redisCli(port, 'sentinel', 'replicas', NAME),
          redisCli(port, 'sentinel', 'sentinels', NAME),
        ]);
        return (
          replicas.includes(String(replica)) &&
          others.split('\n').filter((l) => l === 'ip').length >= 2
        );
      });
    }
  } catch (err) {
    await servers.stop();
    throw err;
  }
  const sentinels = sentinelPorts.map((port) => `127.0.0.1:${port}`).join(',');
  return {
    name: NAME,
    sentinels,
    env: {
      SLUICE_REDIS_SENTINELS: sentinels,
      SLUICE_REDIS_SENTINEL_NAME: NAME,
      ...securityEnv(security, servers.caFile),
    },
    dataPorts: [master, replica],
    masterPort: async () => {
      const [, port] = (
        await redisCli(sentinelPorts[0], 'sentinel', 'get-master-addr-by-name', NAME)
      )
        .trim()
        .split('\n');
      return Number(port);
    },
    kill: (port) => servers.kill(port),
    diagnose: () => Promise.resolve(servers.logTails()),
    stop: () => servers.stop(),
  };
}
