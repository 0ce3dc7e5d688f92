import { ExecuteJobData, Status, finalState, statusOf } from '@app/contracts';
import { ResultSink } from '@app/transport';
import { QueryLifecycle, QueryRef } from './query.lifecycle';
import { ExecutionOutcome } from './tasks/query.runner';

/**
 * What a worker records around each job, whichever transport it runs on: the queue-wait limit
 * before it starts, `running` when it does, the final state when it ends. A job that ends with no
 * writer of its own (it never started, or its task died) is ended through the sink.
 */
export class JobLifecycle {
  constructor(
    private readonly lifecycle: QueryLifecycle,
    private readonly sink: ResultSink,
  ) {}

  /** False (and the query is ended) when the job waited past its latest start. */
  async start(job: ExecuteJobData): Promise<boolean> {
    if (job.startBy !== undefined && Date.now() > job.startBy) {
      const status = statusOf('TIME_LIMIT', 'query waited too long in the queue');
      await this.sink.end(job.queryId, { kind: 'error', status });
      await this.ended(job, status);
      return false;
    }
    await this.lifecycle.transition(queryOf(job), 'running', { startedAt: Date.now() });
    return true;
  }

  async finish(job: ExecuteJobData, outcome: ExecutionOutcome): Promise<void> {
    await this.ended(job, outcome.status, { rows: outcome.rows, bytes: outcome.bytes });
  }

  /** The job may not run (its user's session ended while it waited): end the stream, record it. */
  async refused(job: ExecuteJobData, status: Status): Promise<ExecutionOutcome> {
    await this.sink.end(job.queryId, { kind: 'error', status });
    const outcome = { status, rows: 0, bytes: 0 };
    await this.finish(job, outcome);
    return outcome;
  }

  /** The pool itself failed: end the stream so that the client learns, and record it. */
  async crashed(job: ExecuteJobData): Promise<void> {
    const status = statusOf('INTERNAL');
    // The channel itself may be what failed: the api then notices the silence and ends the query.
    await this.sink.end(job.queryId, { kind: 'error', status }).catch(() => undefined);
    await this.ended(job, status);
  }

  private async ended(
    job: ExecuteJobData,
    status: Status,
    progress?: { rows: number; bytes: number },
  ): Promise<void> {
    await this.lifecycle.transition(queryOf(job), finalState(status), { status, ...progress });
  }
}

function queryOf(job: ExecuteJobData): QueryRef {
  return { queryId: job.queryId, owner: job.username };
}
