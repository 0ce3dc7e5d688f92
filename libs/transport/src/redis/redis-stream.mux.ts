import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { RedisKeys } from '../redis.keys';
import { hashSlot, hashTagOf } from './hash.slot';
import { RedisClient, RedisConnector } from './redis.connector';

/** An entry as XREADBUFFER returns it: its id and its flat field/value list. */
export type StreamEntry = [id: Buffer, fields: Buffer[]];

/** A stream read through the mux for whoever waits on it (one query's result reader). */
export interface MuxSubscriber {
  readonly key: string;
  /** The id of the last entry it was given: the mux reads after it. */
  readonly lastId: string;
  /**
   * Hands over the ids of the entries it was given and has not had deleted: the mux deletes them
   * before reading the stream again, in the same pipeline (the producer's window is the stream's
   * length, so only the deletion lets it go on).
   */
  takeRead(): string[];
  /** New entries of its stream, in order. */
  deliver(entries: StreamEntry[]): void;
  /** The read that was to serve it failed (connection lost, Redis error). */
  fail(err: Error): void;
  /**
   * It has been given a large result's worth already (BULK_BYTES): its stream is read over a
   * connection of its own, beside the small results'. Changes only when it is given entries.
   */
  readonly bulky?: boolean;
}

/**
 * What a subscriber is given before its stream is read apart from the small results' (a bulk
 * result's entries are up to SLUICE_MAX_ENTRY_BYTES each, and an XREAD takes up to the producer's
 * window of them: megabytes a reply, which every stream read in the same XREAD waits behind).
 */
export const BULK_BYTES = 256 * 1024;

export interface StreamMuxOptions {
  /** Makes the blocking connections. */
  connector: RedisConnector;
  /** How long one XREAD blocks at most; a wake ends it sooner. */
  blockMs: number;
  /** The name its blocking connections carry in CLIENT LIST. */
  connectionName: string;
}

/**
 * The streams one multi-key XREAD may read together, and the connection that reads them: those of
 * one hash slot (Redis Cluster), bulk results apart from the rest.
 */
interface MuxGroup {
  /** A stream that ends the group's blocking XREAD when new demand comes. */
  readonly wakeKey: string;
  wakeId: string;
  connection: RedisClient | undefined;
  /** Subscribers waiting for entries now: what the next XREAD reads. */
  readonly waiting: Set<MuxSubscriber>;
  /** The subscribers the XREAD in flight reads for, by key. */
  reading: Map<string, MuxSubscriber> | undefined;
  running: boolean;
}

/** Entries one XREAD takes of each stream at most. */
const COUNT = 64;
/** Wake entries kept: only new ones matter. */
const WAKE_MAXLEN = 16;
/** A wake stream outlives its api process by this much at most. */
const WAKE_TTL_MS = 60_000;
/** Redis Cluster: blocking connections kept for the next slot to read, beyond those reading. */
const IDLE_KEPT = 4;
/** How long a closing connection may take to say it ended. */
const DISCONNECT_WAIT_MS = 2_000;

/** Closes a connection, also one blocked in XREAD (QUIT would wait behind it), and its socket. */
async function disconnected(connection: RedisClient | undefined): Promise<void> {
  if (!connection || connection.status === 'end') return;
  const ended = once(connection, 'end');
  connection.disconnect();
  // A cluster client with no node left to close may never say so: its sockets are closed anyway.
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, DISCONNECT_WAIT_MS)));
  await Promise.race([ended, late]);
  clearTimeout(timer);
}

/**
 * Reads many streams over one blocking connection (large results over a second: BULK_BYTES): one
 * `XREAD BLOCK` over the streams whose subscribers wait for entries right now (demand), so a
 * subscriber that holds entries it has not handed out yet is not read for, and its producer's
 * window stays where it is. New demand while
 * the XREAD blocks ends it at once through the mux's wake stream (Redis orders the commands: a
 * wake sent before the XREAD runs is read by it), and the next XREAD reads for everyone waiting.
 *
 * Redis Cluster refuses a command over keys of two hash slots (CROSSSLOT), and each query's keys
 * have a slot of their own: there the streams are read in groups, one per hash slot, each with a
 * blocking connection while it has demand and a wake key in its slot. A group without demand is
 * dropped and its connection kept for the next (a few at most).
 */
export class RedisStreamMux {
  private readonly id = randomBytes(8).toString('hex');
  private readonly groups = new Map<string, MuxGroup>();
  /** Redis Cluster: blocking connections no group uses now. */
  private readonly idle: RedisClient[] = [];
  /** Wake keys written, to delete at close (they expire by themselves otherwise). */
  private readonly wakeKeys = new Set<string>();
  /** Wakes and loop starts of one tick go out together, when it ends. */
  private scheduled: NodeJS.Immediate | undefined;
  private closed = false;

  constructor(
    private readonly shared: RedisClient,
    private readonly keys: RedisKeys,
    private readonly options: StreamMuxOptions,
  ) {}

  /** Blocking connections made (one per group that was read), and subscribers waiting now. */
  get stats(): { connections: number; waiting: number } {
    let connections = this.idle.length;
    let waiting = 0;
    for (const group of this.groups.values()) {
      if (group.connection && group.connection.status !== 'end') connections += 1;
      waiting += group.waiting.size;
    }
    return { connections, waiting };
  }

  /** Reads a subscriber's stream until it is given entries (or its read fails). */
  want(sub: MuxSubscriber): void {
    if (this.closed) {
      sub.fail(new Error('the result streams reader is closed'));
      return;
    }
    this.groupFor(sub).waiting.add(sub);
    this.scheduled ??= setImmediate(() => this.flush());
  }

  /** Stops reading a subscriber's stream for it (it closed, or stopped waiting). */
  leave(sub: MuxSubscriber): void {
    const group = this.groups.get(this.groupOf(sub));
    if (!group || !group.waiting.delete(sub)) return;
    const reading = group.reading;
    // An XREAD that serves nobody any more would keep the connection blocked until its timeout.
    if (reading?.get(sub.key) === sub && ![...reading.values()].some((s) => group.waiting.has(s))) {
      this.wake(group);
    }
  }

  /** Closes the blocking connections; subscribers still waiting fail. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    const groups = [...this.groups.values()];
    this.groups.clear();
    const closed = new Error('the result streams reader is closed');
    for (const group of groups) {
      for (const sub of group.waiting) sub.fail(closed);
      group.waiting.clear();
    }
    const connections = [...groups.map((g) => g.connection), ...this.idle.splice(0)];
    await Promise.all(connections.map((connection) => disconnected(connection)));
    const wakeKeys = [...this.wakeKeys];
    this.wakeKeys.clear();
    // One DEL per key: in Redis Cluster they are in different slots. Shutting down: a wake
    // stream left behind expires by itself.
    await Promise.all(wakeKeys.map((key) => this.shared.del(key).catch(() => undefined)));
  }

  /**
   * The group a stream is read in: one XREAD reads the streams of one group. A single Redis node
   * (also behind Sentinel) serves any keys together: one group for small results and one for bulk
   * ones. Redis Cluster: the same two for each slot.
   */
  private groupOf(sub: MuxSubscriber): string {
    const slot = this.options.connector.isCluster ? String(hashSlot(sub.key)) : '';
    return sub.bulky ? `${slot}:bulk` : slot;
  }

  private groupFor(sub: MuxSubscriber): MuxGroup {
    const name = this.groupOf(sub);
    let group = this.groups.get(name);
    if (!group) {
      const reader = sub.bulky ? `${this.id}-bulk` : this.id;
      group = {
        wakeKey: this.options.connector.isCluster
          ? this.keys.wake(reader, hashTagOf(sub.key))
          : this.keys.wake(reader),
        wakeId: '0-0',
        connection: undefined,
        waiting: new Set(),
        reading: undefined,
        running: false,
      };
      this.groups.set(name, group);
    }
    return group;
  }

  /** Starts the loop of a group with demand, or wakes its XREAD if it does not read for all. */
  private flush(): void {
    this.scheduled = undefined;
    for (const group of this.groups.values()) {
      if (group.waiting.size === 0) continue;
      if (!group.running) {
        void this.run(group);
      } else if (group.reading) {
        const reading = group.reading;
        if ([...group.waiting].some((s) => reading.get(s.key) !== s)) this.wake(group);
      }
      // Running but between two XREADs: the next one reads for everyone waiting.
    }
  }

  private wake(group: MuxGroup): void {
    this.wakeKeys.add(group.wakeKey);
    this.shared
      .pipeline()
      .xadd(group.wakeKey, 'MAXLEN', '~', WAKE_MAXLEN, '*', 'w', '1')
      .pexpire(group.wakeKey, WAKE_TTL_MS)
      .exec()
      // A lost wake delays the new demand by one block timeout at most.
      .catch(() => undefined);
  }

  private async run(group: MuxGroup): Promise<void> {
    group.running = true;
    try {
      while (!this.closed && group.waiting.size > 0) {
        await this.read(group);
        // Readers just served often want more at once (their client took what they had): let
        // them come back first, so that the next XREAD reads for them without a wake.
        await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      group.running = false;
      if (this.options.connector.isCluster && !this.closed && group.waiting.size === 0) {
        this.drop(group);
      }
    }
  }

  /** Redis Cluster: forgets a group without demand; its connection waits for the next group. */
  private drop(group: MuxGroup): void {
    for (const [name, g] of this.groups) if (g === group) this.groups.delete(name);
    const connection = group.connection;
    group.connection = undefined;
    if (!connection || connection.status === 'end') return;
    if (this.idle.length < IDLE_KEPT) this.idle.push(connection);
    else void disconnected(connection);
  }

  /** One XREAD over the group's demand, its deletions first; never throws. */
  private async read(group: MuxGroup): Promise<void> {
    const reading = new Map<string, MuxSubscriber>();
    // Two readers of one stream take turns: an XREAD names a key once.
    for (const sub of group.waiting) if (!reading.has(sub.key)) reading.set(sub.key, sub);
    const subs = [...reading.values()];
    const pipeline = this.connectionOf(group).pipeline();
    const deleting: MuxSubscriber[] = [];
    for (const sub of subs) {
      const ids = sub.takeRead();
      if (ids.length === 0) continue;
      pipeline.xdel(sub.key, ...ids);
      deleting.push(sub);
    }
    pipeline.xreadBuffer(
      'COUNT',
      COUNT,
      'BLOCK',
      this.options.blockMs,
      'STREAMS',
      group.wakeKey,
      ...reading.keys(),
      group.wakeId,
      ...subs.map((s) => s.lastId),
    );
    group.reading = reading;
    let replies: [Error | null, unknown][] | null;
    let error: Error | undefined;
    try {
      replies = await pipeline.exec();
    } catch (err) {
      replies = null;
      error = err as Error;
    } finally {
      group.reading = undefined;
    }
    const failed = (sub: MuxSubscriber, err: Error) => {
      reading.delete(sub.key);
      group.waiting.delete(sub);
      sub.fail(err);
    };
    if (!replies) {
      error ??= new Error('the result streams read was aborted');
      for (const sub of subs) failed(sub, error);
      return;
    }
    // A subscriber whose deletion failed fails as its read would: its producer would not go on.
    deleting.forEach((sub, i) => {
      const err = replies[i]?.[0];
      if (err) failed(sub, err);
    });
    const [err, reply] = replies[deleting.length] ?? [new Error('XREAD got no reply'), null];
    if (err) {
      for (const sub of reading.values()) failed(sub, err);
      return;
    }
    for (const [key, entries] of (reply as [Buffer, StreamEntry[]][] | null) ?? []) {
      if (entries.length === 0) continue;
      const name = key.toString();
      if (name === group.wakeKey) {
        group.wakeId = entries[entries.length - 1][0].toString();
        continue;
      }
      const sub = reading.get(name);
      if (!sub) continue;
      group.waiting.delete(sub);
      sub.deliver(entries);
    }
  }

  private connectionOf(group: MuxGroup): RedisClient {
    if (group.connection && group.connection.status !== 'end') return group.connection;
    let kept = this.idle.pop();
    while (kept && kept.status === 'end') kept = this.idle.pop();
    if (kept) {
      group.connection = kept;
      return kept;
    }
    const connection = this.options.connector.connect({
      name: this.options.connectionName,
      // A lost connection fails the XREAD in flight at once (its subscribers' reads fail, as a
      // reader's own failed XREAD did) instead of resending it; the next XREAD waits for the
      // reconnect, and fails if that fails.
      maxRetriesPerRequest: 0,
    });
    // Failures reach the subscribers through the commands; the event itself adds nothing.
    connection.on('error', () => undefined);
    group.connection = connection;
    return connection;
  }
}
