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
  private lastProgress = 0;
  private done = false;
  private streaming: NodeJS.Timeout | undefined;

  constructor(
    private readonly registry: QueryRegistry,
    private readonly queryId: string,
    private readonly owner: string,
  ) {}

  /** Counts a record handed to the client. */
  sent(record: ResultRecord): void {
    if (record.kind === 'error') return;
    this.bytes += record.bytes.length;
    if (record.kind === 'head') {
      this.lastProgress = Date.now();
      this.streaming = setTimeout(() => {
        this.streaming = undefined;
        this.quietly(this.registry.update(this.queryId, { state: 'streaming' }));
      }, STREAMING_AFTER_MS);
      return;
    }
    if (record.kind === 'data') this.rows += record.rows;
    if (Date.now() - this.lastProgress >= PROGRESS_EVERY_MS) {
      this.lastProgress = Date.now();
      this.quietly(this.registry.update(this.queryId, { rows: this.rows, bytes: this.bytes }));
    }
  }

  /** Records the end, once. */
  async end(status: Status): Promise<void> {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.streaming);
    await this.registry
      .finish(this.queryId, finalState(status), status, { rows: this.rows, bytes: this.bytes })
      .catch((err: Error) => logger.warn(`query ${this.queryId}: ${err.message}`));
    await this.registry.release(this.owner, this.queryId).catch(() => undefined);
  }

  private quietly(update: Promise<void>): void {
    update.catch((err: Error) => logger.warn(`query ${this.queryId}: ${err.message}`));
  }
}
