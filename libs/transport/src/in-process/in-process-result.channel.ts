import type { MessagePort } from 'node:worker_threads';
import { ResultRecord, bodyBytesOf, isTerminal, statusOf } from '@app/contracts';
import {
  ReaderClosedError,
  ReaderHooks,
  ResultReader,
  ResultSink,
  ResultSource,
} from '../result.channel';
import { ControlMessage, ProgressMessage, RecordMessage, reviveRecord } from './port.messages';
import type { Produced } from '../query.registry';
import { SharedKeptTotal } from './shared-kept.total';

interface Channel {
  records: ResultRecord[];
  /** A kept result: every record stays (readers read by position), and so does the channel. */
  kept?: Kept;
  waiter: (() => void) | undefined;
  port: MessagePort | undefined;
  taken: number;
  cancelled: boolean;
  closed: boolean;
  /** Bytes its owner's kept results hold: known once its producer attached. */
  owner?: SharedKeptTotal;
}

/** A channel with nothing in it yet. */
function newChannel(): Channel {
  return {
    records: [],
    waiter: undefined,
    port: undefined,
    taken: 0,
    cancelled: false,
    closed: false,
  };
}

/** Hands `register` a wake; true when it is called within `ms`, false when the time is up first. */
function wokenWithin(ms: number, register: (wake: () => void) => void): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    register(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** What a kept channel holds beyond a streamed one's. */
interface Kept {
  /** Its records from the `skipped`-th on: a failed result drops those before its error. */
  all: ResultRecord[];
  skipped: number;
  /** Body bytes it holds, counted in the channel's total. */
  held: number;
  /** Readers waiting for the next record. */
  waiters: Set<() => void>;
  /** Its last record came. */
  ended: boolean;
  /** Drops the result once its TTL has passed after its last record. */
  expiry: NodeJS.Timeout | undefined;
}

/** Consumer of a kept in-process result: reads by position, takes nothing away. */
class InProcessKeptReader implements ResultReader {
  private at = 0;
  private closed = false;
  private wake: (() => void) | undefined;

  constructor(
    private readonly channel: Channel & { kept: Kept },
    private readonly hooks: ReaderHooks,
    private readonly silenceMs: number,
  ) {}

  async next(): Promise<ResultRecord> {
    const { kept } = this.channel;
    // What was read is gone (the result failed): the error comes next.
    if (this.at < kept.skipped) this.at = kept.skipped;
    while (this.at - kept.skipped >= kept.all.length) {
      if (this.closed) throw new ReaderClosedError();
      const arrived = await wokenWithin(this.silenceMs, (wake) => {
        this.wake = wake;
        kept.waiters.add(wake);
      });
      kept.waiters.delete(this.wake!);
      if (this.closed) throw new ReaderClosedError();
      if (!arrived && this.at - kept.skipped >= kept.all.length) {
        const verdict = await this.hooks.onSilence();
        if (this.closed) throw new ReaderClosedError();
        if (verdict) return verdict;
      }
      if (this.at < kept.skipped) this.at = kept.skipped;
    }
    return kept.all[this.at++ - kept.skipped];
  }

  cancel(): Promise<void> {
    this.channel.cancelled = true;
    try {
      this.channel.port?.postMessage({ type: 'cancel' } satisfies ControlMessage);
    } catch {
      // the producer is gone already
    }
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.closed = true;
    this.wake?.();
    return Promise.resolve();
  }
}

/** A record that ends a result badly: a kept result keeps only it. */
function failedRecord(record: ResultRecord): boolean {
  return record.kind === 'error' || (record.kind === 'end' && record.status.vendor_code !== 0);
}

/** A channel whose reader closed before its producer attached is kept this long (ms). */
const CLOSED_KEPT_MS = 60_000;

/** Consumer side of one in-process channel; `close()` is its one way out. */
class InProcessReader implements ResultReader {
  private closing: Promise<void> | undefined;

  constructor(
    private readonly channel: Channel,
    private readonly hooks: ReaderHooks,
    private readonly silenceMs: number,
    private readonly onClose: () => void,
  ) {}

  async next(): Promise<ResultRecord> {
    const channel = this.channel;
    while (channel.records.length === 0) {
      if (channel.closed) throw new ReaderClosedError();
      const arrived = await wokenWithin(this.silenceMs, (wake) => (channel.waiter = wake));
      channel.waiter = undefined;
      if (channel.closed) throw new ReaderClosedError();
      if (!arrived && channel.records.length === 0) {
        const verdict = await this.hooks.onSilence();
        if (channel.closed) throw new ReaderClosedError();
        if (verdict) return verdict;
      }
    }
    const record = channel.records.shift()!;
    channel.taken += 1;
    this.send({ type: 'ack', taken: channel.taken });
    return record;
  }

  cancel(): Promise<void> {
    this.channel.cancelled = true;
    this.send({ type: 'cancel' });
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.closing ??= this.release();
    return this.closing;
  }

  private release(): Promise<void> {
    const channel = this.channel;
    channel.closed = true;
    channel.records.length = 0;
    // Wakes a next() that waits: it throws ReaderClosedError (and its silence timer is cleared).
    channel.waiter?.();
    // The producer's writer sees its port close as "consumer gone" and stops.
    channel.port?.close();
    this.onClose();
    return Promise.resolve();
  }

  private send(message: ControlMessage): void {
    try {
      this.channel.port?.postMessage(message);
    } catch {
      // Harmless: the producer closed its end already (it has written its last record).
    }
  }
}

/**
 * The result channel of standalone mode: records come from a piscina thread over a MessagePort
 * and wait in memory (at most a window of them) until the reader takes them. One object is both
 * sides: the source the api reads from and the sink the executor ends queries with.
 */
export class InProcessResultChannel implements ResultSource, ResultSink {
  private readonly channels = new Map<string, Channel>();
  /** Queries whose reader closed before their producer attached, with when (epoch ms). */
  private readonly gone = new Map<string, number>();
  /**
   * Kept results dropped (their TTL passed, DELETE, their user deleted), with when (epoch ms): a
   * reader opened after, by a fetch that found the result kept a moment before, is told it is
   * gone, where it used to make the query a new kept result, empty and kept for good.
   */
  private readonly dropped = new Map<string, number>();
  /** Kept results dropped while their producer still writes, with their owner's total. */
  private readonly draining = new Map<string, SharedKeptTotal | undefined>();
  /** Bytes each user's kept results hold, shared with the threads that write them. */
  private readonly owners = new Map<string, SharedKeptTotal>();

  constructor(
    private readonly silenceMs: number,
    /** How long a kept result stays after its last record (s). */
    private readonly keptTtlSeconds = 3600,
    /** Bytes all kept results hold, taken by their writers and given back here as they go. */
    private readonly keptTotal = new SharedKeptTotal(SharedKeptTotal.buffer()),
  ) {}

  openKept(queryId: string, hooks: ReaderHooks): ResultReader {
    if (this.dropped.has(queryId)) return this.goneReader(queryId, hooks);
    const channel = this.channel(queryId);
    if (!channel.kept) {
      const all = [...channel.records];
      const held = all.reduce((sum, r) => sum + bodyBytesOf(r), 0);
      // Records that came before it was known to be kept: counted now.
      this.keptTotal.take(held, Number.MAX_SAFE_INTEGER);
      channel.owner?.take(held, Number.MAX_SAFE_INTEGER);
      channel.kept = {
        all,
        skipped: 0,
        held,
        ended: false,
        waiters: new Set(),
        expiry: undefined,
      };
    }
    channel.records.length = 0;
    return new InProcessKeptReader(channel as Channel & { kept: Kept }, hooks, this.silenceMs);
  }

  kept(queryId: string): Promise<boolean> {
    return Promise.resolve(this.channels.get(queryId)?.kept !== undefined);
  }

  keptRecords(queryId: string): Promise<ResultRecord[]> {
    return Promise.resolve([...(this.channels.get(queryId)?.kept?.all ?? [])]);
  }

  dropKept(queryId: string): Promise<void> {
    const channel = this.channels.get(queryId);
    if (channel?.kept) {
      clearTimeout(channel.kept.expiry);
      this.give(channel, channel.kept.held);
      channel.kept.held = 0;
      // Dropped while it runs: what its writer still sends was taken from the total, and goes back.
      if (channel.port && !channel.kept.ended) this.draining.set(queryId, channel.owner);
      this.channels.delete(queryId);
      channel.closed = true;
      for (const wake of channel.kept.waiters) wake();
      this.sweep();
      this.dropped.set(queryId, Date.now());
    }
    return Promise.resolve();
  }

  /** A reader of a kept result that was dropped: its only record says so. */
  private goneReader(queryId: string, hooks: ReaderHooks): ResultReader {
    const gone: ResultRecord = {
      kind: 'error',
      status: statusOf('RESULT_GONE', `the result of query ${queryId} is no longer kept`),
    };
    const channel: Channel & { kept: Kept } = {
      ...newChannel(),
      kept: {
        all: [gone],
        skipped: 0,
        held: 0,
        waiters: new Set(),
        ended: true,
        expiry: undefined,
      },
    };
    return new InProcessKeptReader(channel, hooks, this.silenceMs);
  }

  keptBytes(): Promise<number> {
    return Promise.resolve(this.keptTotal.bytes);
  }

  /**
   * The bytes `owner`'s kept results hold (SharedKeptTotal.buffer()'s memory), for the thread that
   * writes one of them to take from; given back here as they go.
   */
  ownerKept(owner: string): SharedArrayBuffer {
    return this.ownerTotal(owner).memory;
  }

  private ownerTotal(owner: string): SharedKeptTotal {
    let total = this.owners.get(owner);
    if (!total) {
      total = new SharedKeptTotal(SharedKeptTotal.buffer());
      this.owners.set(owner, total);
    }
    return total;
  }

  /**
   * Connects the producer's port of a query of `owner`'s; `onProgress` hears what the producer
   * says it has made so far (ProgressMessage), for the registry.
   */
  attach(
    queryId: string,
    port: MessagePort,
    { onProgress, owner }: { onProgress?: (produced: Produced) => void; owner?: string } = {},
  ): void {
    const gone = this.gone.get(queryId);
    if (gone) {
      // Its reader closed before the producer started: nobody will read, so stop it at once.
      this.gone.delete(queryId);
      port.close();
      return;
    }
    const channel = this.channel(queryId);
    channel.port = port;
    if (owner !== undefined) channel.owner = this.ownerTotal(owner);
    port.on('message', (message: RecordMessage | ProgressMessage) => {
      if (message.type === 'progress') {
        const { rows, bytes, streamingAt } = message;
        onProgress?.({ rows, bytes, streamingAt });
      } else this.push(queryId, reviveRecord(message.record));
    });
    if (channel.cancelled) port.postMessage({ type: 'cancel' } satisfies ControlMessage);
  }

  open(queryId: string, hooks: ReaderHooks): ResultReader {
    this.sweep();
    return new InProcessReader(this.channel(queryId), hooks, this.silenceMs, () =>
      this.closed(queryId),
    );
  }

  cancel(queryId: string): Promise<void> {
    const channel = this.channels.get(queryId);
    if (channel) {
      channel.cancelled = true;
      try {
        channel.port?.postMessage({ type: 'cancel' } satisfies ControlMessage);
      } catch {
        // the producer is gone already
      }
    }
    return Promise.resolve();
  }

  cancelAsked(queryId: string): Promise<boolean> {
    return Promise.resolve(this.channels.get(queryId)?.cancelled ?? false);
  }

  /** The reader lives in this process: it cannot die while the job waits. */
  readerGone(): Promise<boolean> {
    return Promise.resolve(false);
  }

  end(queryId: string, record: ResultRecord): Promise<void> {
    this.push(queryId, record);
    return Promise.resolve();
  }

  close(): Promise<void> {
    for (const channel of this.channels.values()) {
      channel.closed = true;
      channel.waiter?.();
      channel.port?.close();
    }
    this.channels.clear();
    this.gone.clear();
    this.dropped.clear();
    this.draining.clear();
    return Promise.resolve();
  }

  /** Readers open, and closed ones whose producer never attached yet (for tests). */
  get stats(): { open: number; gone: number } {
    return { open: this.channels.size, gone: this.gone.size };
  }

  private closed(queryId: string): void {
    const channel = this.channels.get(queryId);
    if (!channel) return;
    this.channels.delete(queryId);
    if (!channel.port) this.gone.set(queryId, Date.now());
  }

  /**
   * Forgets closed channels whose producer never came (its job was removed from the queue), and
   * kept results dropped long enough ago that no fetch that saw them kept is still opening them.
   */
  private sweep(): void {
    const before = Date.now() - CLOSED_KEPT_MS;
    for (const [queryId, at] of this.gone) {
      if (at < before) this.gone.delete(queryId);
    }
    for (const [queryId, at] of this.dropped) {
      if (at >= before) break;
      this.dropped.delete(queryId);
    }
  }

  private channel(queryId: string): Channel {
    let channel = this.channels.get(queryId);
    if (!channel) {
      channel = newChannel();
      this.channels.set(queryId, channel);
    }
    return channel;
  }

  private push(queryId: string, record: ResultRecord): void {
    const channel = this.channels.get(queryId);
    if (!channel && this.draining.has(queryId)) {
      if (!failedRecord(record) && record.kind !== 'error') {
        this.keptTotal.give(bodyBytesOf(record));
        this.draining.get(queryId)?.give(bodyBytesOf(record));
      }
      if (isTerminal(record)) this.draining.delete(queryId);
      return;
    }
    if (!channel || channel.closed) return;
    const kept = channel.kept;
    if (!kept) {
      channel.records.push(record);
      channel.waiter?.();
      return;
    }
    // No reader holds a kept result's producer back: every record is taken as it comes.
    channel.taken += 1;
    try {
      channel.port?.postMessage({ type: 'ack', taken: channel.taken } satisfies ControlMessage);
    } catch {
      // the producer closed its end already
    }
    this.keep(channel, kept, record);
    for (const wake of kept.waiters) wake();
    clearTimeout(kept.expiry);
    kept.expiry = setTimeout(() => void this.dropKept(queryId), this.keptTtlSeconds * 1000);
    kept.expiry.unref();
  }

  /**
   * Adds a record to a kept result; its writer took its bytes from the total already
   * (SharedKeptTotal). A kept result that fails keeps only its error (CappedResultWriter's rule,
   * here where the records are held): what it held goes, and its bytes go back.
   */
  private keep(channel: Channel, kept: Kept, record: ResultRecord): void {
    if (isTerminal(record)) kept.ended = true;
    if (failedRecord(record)) {
      this.dropRecords(channel, kept);
      if (record.kind === 'end') record = { kind: 'error', status: record.status };
    } else if (record.kind !== 'error') {
      // A spooled segment's bytes were taken as any others: they go back the same way.
      kept.held += bodyBytesOf(record);
    }
    kept.all.push(record);
  }

  /** Drops a kept result's records and gives their bytes back; readers skip to what comes next. */
  private dropRecords(channel: Channel, kept: Kept): void {
    this.give(channel, kept.held);
    kept.held = 0;
    kept.skipped += kept.all.length;
    kept.all = [];
  }

  /** Gives a kept result's bytes back to the total and to its owner's. */
  private give(channel: Channel, bytes: number): void {
    this.keptTotal.give(bytes);
    channel.owner?.give(bytes);
  }
}
