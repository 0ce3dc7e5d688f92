import { LoggerService } from '@nestjs/common';
import {
  ExecuteJobData,
  Lane,
  ResultRecord,
  Status,
  pastLatestStart,
  statusOf,
} from '@app/contracts';
import { JobQueue } from '@app/transport';
import { WorkerRosterService } from '../health/worker-roster.service';

/** A worker that took a job and stopped renewing its lock is gone: what its client is told. */
export const WORKER_LOST_REASON = 'the worker running the query stopped; the query was not retried';

/** Asked when a query's result stream goes quiet: a terminal record if its producer is gone. */
export type SilenceCheck = () => Promise<ResultRecord | undefined>;

/** What a quiet result's producer has become, read from its job. */
export type Producer =
  /** It may still write: queued and able to run, held by a live worker, or just ended. */
  | { kind: 'alive' }
  /** Queued, but it would never run (past its latest start, or no worker of its lane): unqueued. */
  | { kind: 'unqueued'; status: Status }
  /** A worker took it and died: it is never run again. */
  | { kind: 'lost'; status: Status }
  /** Its job ended, and a second quiet spell brought no last record either. */
  | { kind: 'ended'; status: Status };

/** The job a result waits on: its id, its lane, and when it is too late to start. */
export interface WatchedJob {
  queryId: string;
  lane: Lane;
  /** Whether it is past its latest start (ExecuteJobData.startBy). */
  late: () => boolean;
}

/**
 * Decides, from the job queue, whether a quiet result stream still has a producer: a job still
 * queued may yet run, one a live worker holds is running, and anything else has ended or is lost.
 * The one judge of both readers of results: the execute response and the fetch of a kept result.
 */
export class ProducerWatch {
  constructor(
    private readonly queue: JobQueue,
    private readonly workers: Pick<WorkerRosterService, 'serving' | 'noWorker'>,
    private readonly logger: LoggerService,
  ) {}

  /** The judge of one job's producer (it remembers what it saw between calls). */
  producerOf(job: WatchedJob): () => Promise<Producer> {
    let endedOnce = false;
    return async () => {
      const state = await this.queue.state(job.queryId);
      switch (state) {
        case 'queued': {
          // Past its latest start, or no worker left to take it (the last one died after it was
          // queued): it will not run, so it need not wait for the queue limit.
          const late = job.late();
          if (!late && (await this.workers.serving(job.lane))) return { kind: 'alive' };
          // A worker took it meanwhile: it runs.
          if (!(await this.queue.removeQueued(job.queryId))) return { kind: 'alive' };
          const status = late
            ? statusOf('TIME_LIMIT', 'query waited too long in the queue')
            : this.workers.noWorker(job.lane).toStatus();
          return { kind: 'unqueued', status };
        }
        case 'active':
          // A worker holds the job and renews its hold: running, however long it is quiet.
          return { kind: 'alive' };
        case 'lost':
          // Its worker died, and no other worker may be left to notice: end the query now. It is
          // never run again: the next worker's stalled check fails the job (maxStalledCount 0)
          // without handing it to the processor, and attempts 1 allows no retry.
          this.logger.warn(`query ${job.queryId}: the worker that took it is gone`);
          return { kind: 'lost', status: statusOf('WORKER_LOST', WORKER_LOST_REASON) };
        default:
          // The job ended; its final record may have been written just after our last read.
          if (!endedOnce) {
            endedOnce = true;
            return { kind: 'alive' };
          }
          this.logger.warn(
            `query ${job.queryId}: job is ${state} but its stream ended without a status`,
          );
          return { kind: 'ended', status: statusOf('WORKER_LOST', WORKER_LOST_REASON) };
      }
    };
  }

  /**
   * The check for the stream of a job this api queued and reads: a terminal error record when
   * the producer is gone. `failKept` replaces a kept result by its error (its bytes given back),
   * as any kept result that fails.
   */
  of(
    job: ExecuteJobData,
    failKept: (queryId: string, status: Status) => Promise<void> = () => Promise.resolve(),
  ): SilenceCheck {
    const producer = this.producerOf({
      queryId: job.queryId,
      lane: job.lane,
      late: () => pastLatestStart(job),
    });
    return async () => {
      const now = await producer();
      if (now.kind === 'alive') return undefined;
      if (now.kind === 'lost' && job.kept) {
        // Best effort: the client is told either way; what is left lapses with its TTL.
        await failKept(job.queryId, now.status).catch((err: Error) => {
          this.logger.warn(`query ${job.queryId}: its kept result stays: ${err.message}`);
        });
      }
      return { kind: 'error', status: now.status };
    };
  }
}
