import type { MessagePort } from 'node:worker_threads';
import { ResultRecord } from '@app/contracts';
import { ResultReader, ResultSource } from '../result.channel';
import { ControlMessage, RecordMessage, reviveRecord } from './port.messages';

interface Channel {
  records: ResultRecord[];
  waiter: (() => void) | undefined;
  port: MessagePort | undefined;
  taken: number;
  cancelled: boolean;
  closed: boolean;
}

/**
 * The result channel of standalone mode: records come from a piscina thread over a MessagePort
 * and wait in memory (at most a window of them) until the reader takes them.
 */
export class InProcessResultChannel implements ResultSource {
  private readonly channels = new Map<string, Channel>();

  constructor(private readonly silenceMs: number) {}

  /** Connects the producer's port of a query. */
  attach(queryId: string, port: MessagePort): void {
    const channel = this.channel(queryId);
    channel.port = port;
    port.on('message', (message: RecordMessage) =>
      this.push(queryId, reviveRecord(message.record)),
    );
    if (channel.cancelled) port.postMessage({ type: 'cancel' } satisfies ControlMessage);
  }

  /** Ends a query's channel from the main thread (its producer failed). */
  fail(queryId: string, record: ResultRecord): void {
    this.push(queryId, record);
  }

  open(queryId: string, onSilence: () => Promise<ResultRecord | undefined>): ResultReader {
    const channel = this.channel(queryId);
    const send = (message: ControlMessage) => {
      try {
        channel.port?.postMessage(message);
      } catch {
        // the producer is gone already
      }
    };
    return {
      next: async () => {
        while (channel.records.length === 0) {
          const arrived = await new Promise<boolean>((resolve) => {
            const timer = setTimeout(() => resolve(false), this.silenceMs);
            channel.waiter = () => {
              clearTimeout(timer);
              resolve(true);
            };
          });
          channel.waiter = undefined;
          if (!arrived && channel.records.length === 0) {
            const verdict = await onSilence();
            if (verdict) return verdict;
          }
        }
        const record = channel.records.shift()!;
        channel.taken += 1;
        send({ type: 'ack', taken: channel.taken });
        return record;
      },
      cancel: () => {
        channel.cancelled = true;
        send({ type: 'cancel' });
        return Promise.resolve();
      },
      close: () => {
        channel.closed = true;
        channel.records.length = 0;
        channel.port?.close();
        this.channels.delete(queryId);
        return Promise.resolve();
      },
    };
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

  abort(queryId: string, record: ResultRecord): Promise<void> {
    this.push(queryId, record);
    return Promise.resolve();
  }

  close(): Promise<void> {
    for (const channel of this.channels.values()) channel.port?.close();
    this.channels.clear();
    return Promise.resolve();
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
