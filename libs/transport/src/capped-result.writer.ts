import { ResultRecord, isTerminal, statusOf } from '@app/contracts';
import { ProducerStoppedError, ResultWriter, StopReason } from './result.channel';

/**
 * A result kept for a later fetch has no reader to hold its producer back: this bounds it by
 * bytes instead. A write that would take the body past `maxBytes` fails with
 * ProducerStoppedError('too-large'), which ends the statement; the final records that report it
 * still go through.
 */
export class CappedResultWriter implements ResultWriter {
  private bytes = 0;
  private wrote = false;

  constructor(
    private readonly inner: ResultWriter,
    private readonly maxBytes: number,
  ) {}

  async write(record: ResultRecord): Promise<void> {
    if (!isTerminal(record)) this.count(record);
    await this.inner.write(record);
    this.wrote = true;
  }

  async writeFinal(records: ResultRecord[]): Promise<void> {
    try {
      for (const record of records) this.count(record);
    } catch (err) {
      if (!(err instanceof ProducerStoppedError)) throw err;
      // Nothing of it is written: the result ends with the reason instead.
      const status = statusOf('RESULT_TOO_LARGE', err.message);
      const end: ResultRecord = this.wrote
        ? { kind: 'end', status, bytes: Buffer.alloc(0), abort: true }
        : { kind: 'error', status };
      return this.inner.writeFinal([end]);
    }
    await this.inner.writeFinal(records);
  }

  watch(onStop: (reason: StopReason) => void): () => void {
    return this.inner.watch(onStop);
  }

  interrupt(reason: StopReason): void {
    this.inner.interrupt(reason);
  }

  private count(record: ResultRecord): void {
    if (record.kind === 'error') return;
    this.bytes += record.bytes.length;
    if (this.bytes > this.maxBytes) throw new ProducerStoppedError('too-large');
  }
}
