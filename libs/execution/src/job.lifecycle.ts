import { Logger } from '@nestjs/common';
import {
  ERROR_CATALOGUE,
  ExecuteJobData,
  QueryState,
  ResultRecord,
  Status,
  statusOf,
} from '@app/contracts';
import { QueryRegistry } from '@app/transport';
import { ExecutionOutcome } from './tasks/query.runner';

/** Tries to write a query's end to the registry before giving up (0.5 s, then 1 s apart). */
const RECORD_ATTEMPTS = 3;

/** The final state a status stands for. */
export function finalState(status: Status): QueryState {
  if (status.vendor_code === 0) return 'succeeded';
  if (status.vendor_code === ERROR_CATALOGUE.CANCELLED.vendorCode) return 'cancelled';
  return 'failed';
}

/**
 * What a worker records around each job, whichever transport it runs on: the queue-wait limit
 * before it starts, `running` when it does, the final state when it ends.
 */
export class JobLifecycle {
  private readonly logger = new Logger(JobLifecycle.name);

  constructor(private readonly registry: QueryRegistry) {}

  /** False (and the query is ended) when the job waited past its latest start. */
  async start(
    job: ExecuteJobData,
    abortResult: (record: ResultRecord) => Promise<void>,
  ): Promise<boolean> {
    if (job.startBy !== undefined && Date.now() > job.startBy) {
      const status = statusOf('TIME_LIMIT', 'query waited too long in the queue');
      await abortResult({ kind: 'error', status });
      await this.ended(job, status);
      return false;
    }
    // Shown as queued until it ends: the final state, written in ended(), is the one that counts.
    await this.registry
      .update(job.queryId, { state: 'running', startedAt: Date.now() })
      .catch(() => undefined);
    return true;
  }

  async finish(job: ExecuteJobData, outcome: ExecutionOutcome): Promise<void> {
    await this.ended(job, outcome.status, { rows: outcome.rows, bytes: outcome.bytes });
  }

  /** The pool itself failed: end the stream so that the client learns, and record it. */
  async crashed(
    job: ExecuteJobData,
    abortResult: (record: ResultRecord) => Promise<void>,
  ): Promise<void> {
    const status = statusOf('INTERNAL');
    // The channel itself may be what failed: the api then notices the silence and ends the query.
    await abortResult({ kind: 'error', status }).catch(() => undefined);
    await this.ended(job, status);
  }

  private async ended(
    job: ExecuteJobData,
    status: Status,
    progress?: { rows: number; bytes: number },
  ): Promise<void> {
    await this.retried(job, 'record its final state', () =>
      this.registry.finish(job.queryId, finalState(status), status, progress),
    );
    await this.retried(job, "free its owner's slot", () =>
      this.registry.release(job.username, job.queryId),
    );
  }

  /**
   * A query's end must reach the registry: else it shows as running, and its slot counts against
   * SLUICE_MAX_ACTIVE_PER_USER until the registry prunes it (a day). A Redis blip is retried.
   */
  private async retried(
    job: ExecuteJobData,
    what: string,
    write: () => Promise<void>,
  ): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await write();
      } catch (err) {
        if (attempt === RECORD_ATTEMPTS) {
          this.logger.error(`query ${job.queryId}: cannot ${what}: ${(err as Error).message}`);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, attempt * 500));
      }
    }
  }
}
