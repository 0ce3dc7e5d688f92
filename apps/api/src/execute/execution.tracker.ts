import { Logger } from '@nestjs/common';
import { ResultRecord, Status } from '@app/contracts';
import { finalState } from '@app/execution';
import { QueryRegistry } from '@app/transport';

const PROGRESS_EVERY_MS = 500;
/** A query that ends sooner is never shown as streaming: one registry write saved per query. */
const STREAMING_AFTER_MS = 100;
const logger = new Logger('ExecutionTracker');

/**
 * Keeps one query's entry in the registry up to date from the api's side: streaming once its
 * body starts, rows and bytes sent (every half second), the final state, and the owner's slot.
 */
export class ExecutionTracker {
  rows = 0;
  bytes = 0;
  private written = false;
  private done = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly registry: QueryRegistry,
    private readonly queryId: string,
    private readonly owner: string,
  ) {}

  /** Counts a record handed to the client; the registry hears of it soon after, not each time. */
  sent(record: ResultRecord): void {
    if (record.kind === 'error') return;
    this.bytes += record.bytes.length;
    if (record.kind === 'data') this.rows += record.rows;
    this.schedule();
  }

  /** Records the end, once. */
  async end(status: Status): Promise<void> {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    await this.registry
      .finish(this.queryId, finalState(status), status, { rows: this.rows, bytes: this.bytes })
      .catch((err: Error) => logger.warn(`query ${this.queryId}: ${err.message}`));
    await this.registry.release(this.owner, this.queryId).catch(() => undefined);
  }

  /** One write per half second at most, the first after 100 ms (short queries never need one). */
  private schedule(): void {
    if (this.timer || this.done) return;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.written = true;
        this.registry
          .update(this.queryId, { state: 'streaming', rows: this.rows, bytes: this.bytes })
          .catch((err: Error) => logger.warn(`query ${this.queryId}: ${err.message}`));
      },
      this.written ? PROGRESS_EVERY_MS : STREAMING_AFTER_MS,
    );
  }
}
