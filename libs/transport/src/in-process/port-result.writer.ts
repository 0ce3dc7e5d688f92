import type { MessagePort } from 'node:worker_threads';
import { ResultRecord, isTerminal } from '@app/contracts';
import {
  FlowWindow,
  ProducerStoppedError,
  ResultWriter,
  StopReason,
  recordSize,
} from '../result.channel';
import { ControlMessage, RecordMessage } from './port.messages';

/**
 * Producer side of the in-process result channel: a piscina thread posts records to the main
 * thread over a MessagePort and waits, like the Redis writer, while a full window is unread.
 */
export class PortResultWriter implements ResultWriter {
  private readonly sizes: number[] = [];
  private sent = 0;
  private taken = 0;
  private bytesInFlight = 0;
  private cancelled = false;
  private interrupted: StopReason | undefined;
  private wake: (() => void) | undefined;
  private onStop: ((reason: StopReason) => void) | undefined;

  /** Standalone mode's main thread records the end when it reads it off the port. */
  readonly endRecorded = false;

  constructor(
    private readonly port: MessagePort,
    private readonly window: FlowWindow,
  ) {
    port.on('message', (message: ControlMessage) => {
      if (message.type === 'cancel') {
        this.cancelled = true;
        this.onStop?.('cancelled');
      } else this.settle(message.taken);
      this.wake?.();
    });
    // The consumer closes its end when it stops reading.
    port.on('close', () => this.onStop?.('consumer-gone'));
    // The port must not keep the thread's event loop alive on its own.
    port.unref();
  }

  async write(record: ResultRecord): Promise<void> {
    const terminal = isTerminal(record);
    if (!terminal) {
      if (this.interrupted) throw new ProducerStoppedError(this.interrupted);
      if (this.cancelled) throw new ProducerStoppedError('cancelled');
      await this.waitForRoom();
    }
    const size = recordSize(record);
    this.sizes.push(size);
    this.bytesInFlight += size;
    this.sent += 1;
    this.port.postMessage({ type: 'record', record } satisfies RecordMessage);
    if (terminal) {
      this.onStop = undefined;
      this.port.close();
    }
  }

  watch(onStop: (reason: StopReason) => void): () => void {
    let called = false;
    this.onStop = (reason) => {
      if (called) return;
      called = true;
      onStop(reason);
    };
    if (this.cancelled) this.onStop('cancelled');
    return () => {
      this.onStop = undefined;
    };
  }

  interrupt(reason: StopReason): void {
    this.interrupted ??= reason;
    this.wake?.();
  }

  async writeFinal(records: ResultRecord[]): Promise<void> {
    // Posting costs no round trip here: the records simply go one by one.
    for (const record of records) await this.write(record);
  }

  private settle(taken: number): void {
    while (this.taken < taken && this.sizes.length > 0) {
      this.bytesInFlight -= this.sizes.shift()!;
      this.taken += 1;
    }
  }

  private full(): boolean {
    const inFlight = this.sent - this.taken;
    return inFlight >= this.window.chunks || this.bytesInFlight >= this.window.bytes;
  }

  private async waitForRoom(): Promise<void> {
    while (this.full()) {
      const before = this.taken;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.window.idleTimeoutMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
      if (this.interrupted) throw new ProducerStoppedError(this.interrupted);
      if (this.cancelled) throw new ProducerStoppedError('cancelled');
      if (this.taken === before && this.full()) throw new ProducerStoppedError('client-idle');
    }
  }
}
