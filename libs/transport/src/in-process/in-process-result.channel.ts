import type { MessagePort } from 'node:worker_threads';
import { ResultRecord } from '@app/contracts';
import {
  ReaderClosedError,
  ReaderHooks,
  ResultReader,
  ResultSink,
  ResultSource,
} from '../result.channel';
import { ControlMessage, RecordMessage, reviveRecord } from './port.messages';

interface Channel {
  records: ResultRecord[];
  waiter: (() => void) | undefined;
  port: MessagePort | undefined;
  taken: number;
  cancelled: boolean;
  closed: boolean;
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
      const arrived = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), this.silenceMs);
        channel.waiter = () => {
          clearTimeout(timer);
          resolve(true);
        };
      });
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

  constructor(private readonly silenceMs: number) {}

  /** Connects the producer's port of a query. */
  attach(queryId: string, port: MessagePort): void {
    const gone = this.gone.get(queryId);
    if (gone) {
      // Its reader closed before the producer started: nobody will read, so stop it at once.
      this.gone.delete(queryId);
      port.close();
      return;
    }
    const channel = this.channel(queryId);
    channel.port = port;
    port.on('message', (message: RecordMessage) =>
      this.push(queryId, reviveRecord(message.record)),
    );
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

  /** Forgets closed channels whose producer never came (its job was removed from the queue). */
  private sweep(): void {
    const before = Date.now() - CLOSED_KEPT_MS;
    for (const [queryId, at] of this.gone) {
      if (at < before) this.gone.delete(queryId);
    }
  }

  private channel(queryId: string): Channel {
    let channel = this.channels.get(queryId);
    if (!channel) {
      channel = {
        records: [],
        waiter: undefined,
        port: undefined,
        taken: 0,
        cancelled: false,
        closed: false,
      };
      this.channels.set(queryId, channel);
    }
    return channel;
  }

  private push(queryId: string, record: ResultRecord): void {
    const channel = this.channels.get(queryId);
    if (!channel || channel.closed) return;
    channel.records.push(record);
    channel.waiter?.();
  }
}
