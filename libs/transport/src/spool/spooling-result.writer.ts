import { randomBytes } from 'node:crypto';
import { ResultRecord, SpooledSegment, isTerminal } from '@app/contracts';
import { ProducerStoppedError, ResultWriter, StopReason } from '../result.channel';
import { ResultSpool, segmentPrefix } from './result.spool';

const EMPTY = Buffer.alloc(0);
/** What a segment's buffer starts at: a small kept result holds little. */
const FIRST_BUFFER_BYTES = 64 * 1024;

/** When a segment is written: at a size, or once it has held bytes a while (a running fetch sees them). */
export interface SegmentPolicy {
  /** A segment is written once it holds this many bytes. */
  segmentBytes: number;
  /** A segment holding bytes is written at the next write after this long (ms). */
  sealMs: number;
}

/**
 * Writes a kept result's body to the spool, in segments, and only their list to the channel
 * behind (`inner`): each record goes on with its bytes taken out, and each segment, once written,
 * as a `data` record that names it (its key, offset and size) and carries the rows it holds. At
 * most one segment's bytes are held in memory: copied into one buffer, reused segment after
 * segment, that the spool writes as it is (records' own buffers are not kept, nor joined into
 * another copy for the write). A result that fails keeps only its error: the
 * segments written are deleted (a sweep deletes any that a store gone away kept).
 */
export class SpoolingResultWriter implements ResultWriter {
  /** The segment being filled: its first `held` bytes. */
  private buffer = EMPTY;
  private held = 0;
  private rows = 0;
  private openedAt = 0;
  private offset = 0;
  private readonly written: string[] = [];
  /** Names this run's segments apart from another run of the same query (a retried job). */
  private readonly run = randomBytes(4).toString('hex');
  private interrupted: StopReason | undefined;

  /** The writer it writes through: a kept result's, whose end its job lifecycle records. */
  get endRecorded(): boolean {
    return this.inner.endRecorded;
  }

  constructor(
    private readonly inner: ResultWriter,
    private readonly spool: ResultSpool,
    private readonly queryId: string,
    private readonly policy: SegmentPolicy,
    private readonly now: () => number = Date.now,
  ) {}

  async write(record: ResultRecord): Promise<void> {
    if (isTerminal(record)) return this.writeFinal([record]);
    if (this.interrupted) throw new ProducerStoppedError(this.interrupted);
    this.take(record);
    if (record.kind === 'head') await this.inner.write({ ...record, bytes: EMPTY });
    const full = this.held >= this.policy.segmentBytes;
    const waited = this.held > 0 && this.now() - this.openedAt >= this.policy.sealMs;
    if (full || waited) await this.inner.write(await this.seal());
  }

  async writeFinal(records: ResultRecord[]): Promise<void> {
    const last = records.at(-1);
    if (!last) return;
    if (last.kind === 'error') {
      await this.discard();
      return this.inner.writeFinal(records);
    }
    for (const record of records) this.take(record);
    const segment = this.held > 0 ? [await this.seal()] : [];
    // Data records are folded into the segment (their rows too); the rest go on without bytes.
    const rest = records
      .filter((record) => record.kind !== 'data')
      .map((record) => (record.kind === 'error' ? record : { ...record, bytes: EMPTY }));
    await this.inner.writeFinal([...segment, ...rest]);
  }

  watch(onStop: (reason: StopReason) => void): () => void {
    return this.inner.watch(onStop);
  }

  interrupt(reason: StopReason): void {
    this.interrupted ??= reason;
    this.inner.interrupt(reason);
  }

  /** Adds a record's bytes (and a data record's rows) to the segment being filled. */
  private take(record: ResultRecord): void {
    if (record.kind === 'error') return;
    if (record.kind === 'data') this.rows += record.rows;
    if (record.bytes.length === 0) return;
    if (this.held === 0) this.openedAt = this.now();
    this.reserve(record.bytes.length);
    record.bytes.copy(this.buffer, this.held);
    this.held += record.bytes.length;
  }

  /** Room for `bytes` more: the buffer doubles, up to a segment's size unless a record needs more. */
  private reserve(bytes: number): void {
    const need = this.held + bytes;
    if (need <= this.buffer.length) return;
    const doubled = Math.max(FIRST_BUFFER_BYTES, 2 * this.buffer.length);
    const size = Math.max(need, Math.min(doubled, this.policy.segmentBytes));
    const next = Buffer.allocUnsafe(size);
    this.buffer.copy(next, 0, 0, this.held);
    this.buffer = next;
  }

  /** Writes the segment being filled; the record that names it. */
  private async seal(): Promise<ResultRecord & { kind: 'data' }> {
    const key = `${segmentPrefix(this.queryId)}${this.run}.${String(this.written.length + 1).padStart(6, '0')}`;
    const segment: SpooledSegment = { key, offset: this.offset, size: this.held };
    // Counted before the write: one that fails may have left an object behind.
    this.written.push(key);
    // The buffer is filled again only once the spool has written it.
    await this.spool.put(key, [this.buffer.subarray(0, this.held)]);
    const record = { kind: 'data' as const, rows: this.rows, bytes: EMPTY, segment };
    this.offset += this.held;
    this.held = 0;
    this.rows = 0;
    return record;
  }

  /** Deletes what this result wrote to the spool; a store that refuses leaves it to the sweep. */
  private async discard(): Promise<void> {
    this.buffer = EMPTY;
    this.held = 0;
    // The sweep deletes them by age once the result is gone: a failed result's error matters more.
    await this.spool.remove(this.written).catch(() => undefined);
  }
}
