import { ResultRecord, Status, isTerminal, statusOf } from '@app/contracts';
import { ProducerStoppedError, ResultWriter, StopReason } from './result.channel';

/**
 * The share of the total every kept result draws on (SLUICE_RESULT_TOTAL_MAX_BYTES), for one
 * result. Where the records are held in another process (Redis), the writer takes its bytes
 * before it writes them; in-process, the channel that holds them counts them itself.
 */
export interface KeptBudget {
  /** Takes `bytes` more; nothing taken, and why, when a cap would be passed. */
  take(bytes: number): Promise<KeptRefusal | undefined>;
  /** Gives back all this result took: it failed, and what it wrote is gone. */
  release(): Promise<void>;
}

/** The caps a kept result's bytes count against: all kept results' together, and its owner's. */
export interface KeptCaps {
  total: number;
  user: number;
}

/** Why a kept result may not take more bytes: all kept results' cap, or its owner's. */
export type KeptRefusal = Extract<StopReason, 'kept-full' | 'kept-user-full'>;

/** A result that does not end well: its records are of no use to a later fetch. */
function failed(record: ResultRecord): record is ResultRecord & { status: Status } {
  return record.kind === 'error' || (record.kind === 'end' && record.status.vendor_code !== 0);
}

/**
 * A result kept for a later fetch has no reader to hold its producer back: this bounds it by
 * bytes instead — its own (`maxBytes`) and its share of all kept results' (`budget`). A write
 * that would pass either fails with ProducerStoppedError ('too-large', 'kept-full'), which ends
 * the statement. A kept result that fails keeps only its error, as one `error` record: the writer
 * behind drops what was written before it (so a fetch answers the error's envelope), and the
 * budget gets those bytes back.
 */
export class CappedResultWriter implements ResultWriter {
  private bytes = 0;

  /** The writer it writes through: a kept result's, whose end its job lifecycle records. */
  get endRecorded(): boolean {
    return this.inner.endRecorded;
  }

  constructor(
    private readonly inner: ResultWriter,
    private readonly maxBytes: number,
    private readonly budget?: KeptBudget,
  ) {}

  async write(record: ResultRecord): Promise<void> {
    if (isTerminal(record)) return this.writeFinal([record]);
    await this.take(this.count(record));
    await this.inner.write(record);
  }

  async writeFinal(records: ResultRecord[]): Promise<void> {
    const last = records[records.length - 1];
    if (failed(last)) return this.fail(last.status);
    try {
      let bytes = 0;
      for (const record of records) bytes += this.count(record);
      // Also for 0 bytes: it moves the result's expiry to that of its last write.
      await this.take(bytes);
    } catch (err) {
      if (!(err instanceof ProducerStoppedError)) throw err;
      return this.fail(statusOf('RESULT_TOO_LARGE', err.message));
    }
    await this.inner.writeFinal(records);
  }

  watch(onStop: (reason: StopReason) => void): () => void {
    return this.inner.watch(onStop);
  }

  interrupt(reason: StopReason): void {
    this.inner.interrupt(reason);
  }

  private async fail(status: Status): Promise<void> {
    await this.inner.writeFinal([{ kind: 'error', status }]);
    await this.budget?.release();
  }

  private async take(bytes: number): Promise<void> {
    const refused = await this.budget?.take(bytes);
    if (refused) throw new ProducerStoppedError(refused);
  }

  private count(record: ResultRecord): number {
    if (record.kind === 'error') return 0;
    this.bytes += record.bytes.length;
    if (this.bytes > this.maxBytes) throw new ProducerStoppedError('too-large');
    return record.bytes.length;
  }
}
