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
  constructor(private readonly registry: QueryRegistry) {}

  /** False (and the query is ended) when the job waited past its latest start. */
  async start(job: ExecuteJobData, end: (record: ResultRecord) => Promise<void>): Promise<boolean> {
    if (job.startBy !== undefined && Date.now() > job.startBy) {
      const status = statusOf('TIME_LIMIT', 'query waited too long in the queue');
      await end({ kind: 'error', status });
      await this.ended(job, status);
      return false;
    }
    await this.registry
      .update(job.queryId, { state: 'running', startedAt: Date.now() })
      .catch(() => undefined);
    return true;
  }

  async finish(job: ExecuteJobData, outcome: ExecutionOutcome): Promise<void> {
    await this.ended(job, outcome.status, { rows: outcome.rows, bytes: outcome.bytes });
  }

  /** The pool itself failed: end the stream so that the client learns, and record it. */
  async crashed(job: ExecuteJobData, end: (record: ResultRecord) => Promise<void>): Promise<void> {
    const status = statusOf('INTERNAL');
    await end({ kind: 'error', status }).catch(() => undefined);
    await this.ended(job, status);
  }

  private async ended(
    job: ExecuteJobData,
    status: Status,
    progress?: { rows: number; bytes: number },
  ): Promise<void> {
    await this.registry
      .finish(job.queryId, finalState(status), status, progress)
      .catch(() => undefined);
    await this.registry.release(job.username, job.queryId).catch(() => undefined);
  }
}
