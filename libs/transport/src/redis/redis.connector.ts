import Redis, { Cluster, RedisOptions } from 'ioredis';
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import type { RedisSettings } from '@app/config';

/** A connection to Redis as Sluice uses it: one node (also behind Sentinel) or a Redis Cluster. */
export type RedisClient = Redis | Cluster;

/** What a connection is for: how long a command waits for Redis, and how commands go out. */
export interface RedisConnectionOptions {
  /** The name it carries in CLIENT LIST. */
  name?: string;
  /**
   * Reconnects a command waits through before it fails (0: fails with the connection it was sent
   * on); null: waits as long as it takes, as BullMQ's connections must.
   */
  maxRetriesPerRequest: number | null;
  enableAutoPipelining?: boolean;
  /** How long a connection attempt may take (ms). */
  connectTimeout?: number;
}

/** Options with the unset ones left out, so that ioredis's defaults apply to them. */
function defined<T extends object>(options: T): T {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as T;
}

/**
 * Builds every Redis connection Sluice makes (api, worker, BullMQ, blocking readers, heartbeats,
 * piscina threads) from the one configured mode, so that none is made another way.
 */
export class RedisConnector {
  /** TLS options for the nodes (and Sentinels), when the mode asks for TLS. */
  private readonly tls?: ConnectionOptions;

  constructor(readonly settings: RedisSettings) {
    if (settings.mode !== 'single' && settings.tls) {
      this.tls = settings.tlsCa ? { ca: readFileSync(settings.tlsCa) } : {};
    }
  }

  /** Redis Cluster: a multi-key command or a pipeline must stay within one hash slot. */
  get isCluster(): boolean {
    return this.settings.mode === 'cluster';
  }

  connect(options: RedisConnectionOptions): RedisClient {
    const settings = this.settings;
    const node: RedisOptions = defined({
      connectionName: options.name,
      maxRetriesPerRequest: options.maxRetriesPerRequest,
      connectTimeout: options.connectTimeout,
    });
    const pipelining = defined({ enableAutoPipelining: options.enableAutoPipelining });
    switch (settings.mode) {
      case 'single':
        return new Redis(settings.url, { ...node, ...pipelining });
      case 'sentinel':
        return new Redis({
          ...node,
          ...pipelining,
          sentinels: settings.sentinels,
          name: settings.name,
          ...defined({ password: settings.password, sentinelPassword: settings.sentinelPassword }),
          // The Sentinels are asked over TLS as well as the master.
          ...(this.tls
            ? { tls: this.tls, sentinelTLS: this.tls, enableTLSForSentinelMode: true }
            : {}),
        });
      case 'cluster': {
        const cluster = new Cluster(settings.nodes, {
          ...pipelining,
          redisOptions: {
            ...node,
            ...defined({ password: settings.password }),
            ...(this.tls ? { tls: this.tls } : {}),
          },
          // A command to a master that is gone is retried on the slot's new owner, for a second
          // and a half at most (16 redirections 100 ms apart), then fails.
          retryDelayOnFailover: 100,
          retryDelayOnClusterDown: 100,
          // A failover is also noticed with no command to redirect.
          slotsRefreshInterval: 2_000,
        });
        if (options.maxRetriesPerRequest !== null) failFastOnceReady(cluster);
        return cluster;
      }
    }
  }
}

/**
 * A Cluster client queues every command, with no bound, while it has no node to send it to: with
 * every node gone, a request would wait until Redis came back. A connection that is to fail
 * rather than wait (a number of retries, as a single node's maxRetriesPerRequest bounds them)
 * queues only until it first connects, so that start-up waits for the cluster; after that a
 * command fails at once while no node answers.
 */
function failFastOnceReady(cluster: Cluster): void {
  cluster.once('ready', () => {
    cluster.options.enableOfflineQueue = false;
  });
}

/** Hash slots of a Redis Cluster. */
const CLUSTER_SLOTS = 16_384;

/**
 * Answers when every node that holds keys answers PING: one master of a Redis Cluster down is an
 * outage for the queries whose keys it holds, though the others still answer. A cluster's masters
 * are those its slot table names, not the connections open now: ioredis drops the connection of
 * a node that died at once, and learns who took its slots only later.
 */
export async function pingEvery(client: RedisClient): Promise<string> {
  if (!(client instanceof Cluster)) return client.ping();
  if (client.status !== 'ready')
    throw new Error(`the Redis Cluster connection is ${client.status}`);
  const open = new Map(
    client.nodes('master').map((node) => [`${node.options.host}:${node.options.port}`, node]),
  );
  const owners = new Set<string>();
  for (let slot = 0; slot < CLUSTER_SLOTS; slot++) {
    const owner = client.slots[slot]?.[0];
    if (!owner) throw new Error(`no Redis Cluster master known for slot ${slot}`);
    owners.add(owner);
  }
  await Promise.all(
    [...owners].map((owner) => {
      const node = open.get(owner);
      if (!node) throw new Error(`the Redis Cluster master ${owner} is gone`);
      return node.ping();
    }),
  );
  return `PONG from ${owners.size} masters`;
}

/** True for a Redis Cluster client (its commands are routed by hash slot). */
export function isClusterClient(client: RedisClient): client is Cluster {
  return client instanceof Cluster;
}
