import { join } from 'node:path';
import { RedisSecurity, RedisServers, redisCli, securityEnv, waitFor } from './redis-servers';
import { freePort } from './free-port';

/** A Redis Cluster a test started on loopback. */
export interface RedisClusterTopology {
  /** 'host:port,...' of every node, for SLUICE_REDIS_CLUSTER_NODES. */
  nodes: string;
  /** The environment that points a Sluice process at it (SLUICE_REDIS_CLUSTER_NODES, …). */
  env: Record<string, string>;
  /** Ports of the current masters. */
  masters(): Promise<number[]>;
  /** Port of the master that now serves the slot of this key. */
  masterOf(key: string): Promise<number>;
  /** SIGKILLs the redis-server listening on that port (a crash, not a shutdown). */
  kill(port: number): Promise<void>;
  /** Starts a killed node again: it rejoins as a replica, in sync once this resolves. */
  revive(port: number): Promise<void>;
  /** What the nodes say and last logged: to explain a test that failed. */
  diagnose(): Promise<string>;
  /** Stops every process it started and removes its files; safe to call twice. */
  stop(): Promise<void>;
}

/** One line of CLUSTER NODES: the node's port, whether it is a live master, and its slots. */
function parseNode(line: string): { port: number; liveMaster: boolean; slots: string[] } {
  const [, address, flags, , , , , , ...slots] = line.split(' ');
  const port = Number(address.split('@')[0].split(':').pop());
  const liveMaster = flags.split(',').includes('master') && !flags.includes('fail');
  return { port, liveMaster, slots };
}

/**
 * A Redis Cluster of `masters` masters, each with `replicas` replicas, formed the way an operator
 * forms one (`redis-cli --cluster create`, as docker-compose.redis-cluster.yml does); resolves
 * once every node sees the cluster whole and every replica has its master's data.
 */
export async function startRedisCluster(
  options: {
    masters?: number;
    replicas?: number;
    nodeTimeoutMs?: number;
    security?: RedisSecurity;
  } = {},
): Promise<RedisClusterTopology> {
  const { masters = 3, replicas = 0, nodeTimeoutMs = 1000, security = {} } = options;
  const servers = new RedisServers(security);
  const ports: number[] = [];
  /**
   * Each node's cluster bus port, drawn as its port is: Redis's default (the port + 10000) lands
   * where nothing checked it was free — in the kernel's ephemeral range, or on a port another
   * run's freePort() handed out.
   */
  const busPorts = new Map<number, number>();
  const dead = new Set<number>();
  const nodeArgs = (port: number) => [
    '--cluster-enabled',
    'yes',
    '--cluster-port',
    String(busPorts.get(port)),
    // Kept across a restart: a node that comes back knows its cluster.
    '--cluster-config-file',
    join(servers.dir, `nodes-${port}.conf`),
    '--cluster-node-timeout',
    String(nodeTimeoutMs),
  ];
  const inSync = async (port: number) => {
    const info = await redisCli(port, 'cluster', 'info');
    const replication = await redisCli(port, 'info', 'replication');
    // A replica that never synced would refuse to fail over (its data counts as too old).
    const synced =
      replication.includes('role:master') || replication.includes('master_link_status:up');
    return info.includes('cluster_state:ok') && synced;
  };
  try {
    for (let i = 0; i < masters * (1 + replicas); i++) {
      const port = await freePort();
      ports.push(port);
      busPorts.set(port, await freePort());
    }
    await Promise.all(ports.map((port) => servers.start(port, nodeArgs(port))));
    await redisCli(
      ports[0],
      '--cluster',
      'create',
      ...ports.map((port) => `127.0.0.1:${port}`),
      '--cluster-replicas',
      String(replicas),
      '--cluster-yes',
    );
    for (const port of ports) await waitFor(`cluster node ${port}`, () => inSync(port));
  } catch (err) {
    await servers.stop();
    throw err;
  }
  const liveNode = () => ports.find((port) => !dead.has(port))!;
  const liveMasters = async () =>
    (await redisCli(liveNode(), 'cluster', 'nodes'))
      .split('\n')
      .filter((line) => line.trim())
      .map(parseNode)
      .filter((node) => node.liveMaster);
  const nodes = ports.map((port) => `127.0.0.1:${port}`).join(',');
  return {
    nodes,
    env: {
      SLUICE_REDIS_CLUSTER_NODES: nodes,
      ...securityEnv({ ...security, sentinelPassword: undefined }, servers.caFile),
    },
    masters: async () => (await liveMasters()).map((node) => node.port),
    masterOf: async (key) => {
      const slot = Number((await redisCli(liveNode(), 'cluster', 'keyslot', key)).trim());
      const owner = (await liveMasters()).find((node) =>
        node.slots.some((range) => {
          const [from, to = from] = range.split('-').map(Number);
          return slot >= from && slot <= to;
        }),
      );
      if (!owner) throw new Error(`no live master serves slot ${slot}`);
      return owner.port;
    },
    kill: async (port) => {
      await servers.kill(port);
      dead.add(port);
    },
    revive: async (port) => {
      await servers.start(port, nodeArgs(port));
      dead.delete(port);
      await waitFor(`node ${port} back as a replica`, async () => {
        const replication = await redisCli(port, 'info', 'replication');
        return replication.includes('role:slave') && (await inSync(port));
      });
    },
    diagnose: async () => {
      const nodes = await redisCli(liveNode(), 'cluster', 'nodes').catch(
        (err: Error) => err.message,
      );
      return `cluster nodes:\n${nodes}\n${servers.logTails()}`;
    },
    stop: () => servers.stop(),
  };
}
