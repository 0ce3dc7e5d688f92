import { LoggerService } from '@nestjs/common';
import { ExecuteJobData, ResultRecord, Status, pastLatestStart, statusOf } from '@app/contracts';
import { JobQueue } from '@app/transport';
import { AdmissionService } from './admission.service';

/** A worker that took a job and stopped renewing its lock is gone: what its client is told. */
const WORKER_LOST_REASON = 'the worker running the query stopped; the query was not retried';

/** Asked when a query's result stream goes quiet: a terminal record if its producer is gone. */
export type SilenceCheck = () => Promise<ResultRecord | undefined>;

/**
 * Decides, from the job queue, whether a quiet result stream still has a producer: a job still
 * queued may yet run, one a live worker holds is running, and anything else has ended or is lost.
 */
export class ProducerWatch {
  constructor(
    private readonly queue: JobQueue,
    private readonly admission: Pick<AdmissionService, 'workerAlive' | 'noWorker'>,
    private readonly logger: LoggerService,
    /** Replaces a kept result by its error (its bytes given back), as any kept result that fails. */
    private readonly failKept: (queryId: string, status: Status) => Promise<void> = () =>
      Promise.resolve(),
  ) {}

  /** The check for one job's stream (it remembers what it saw between calls). */
  of(job: ExecuteJobData): SilenceCheck {
    let endedOnce = false;
    return async () => {
      const state = await this.queue.state(job.queryId);
      switch (state) {
        case 'queued': {
          // Past its latest start, or no worker left to take it (the last one died after it was
          // queued): it will not run, so it need not wait for the queue limit.
          const late = pastLatestStart(job);
          if (!late && (await this.admission.workerAlive(job.lane))) return undefined;
          if (!(await this.queue.removeQueued(job.queryId))) return undefined;
          const status = late
            ? statusOf('TIME_LIMIT', 'query waited too long in the queue')
            : this.admission.noWorker(job.lane).toStatus();
          return { kind: 'error', status };
        }
        case 'active':
          // A worker holds the job and renews its hold: running, however long it is quiet.
          return undefined;
        case 'lost': {
          // Its worker died, and no other worker may be left to notice: end the query now. It is
          // never run again: the next worker's stalled check fails the job (maxStalledCount 0)
          // without handing it to the processor, and attempts 1 allows no retry.
          this.logger.warn(`query ${job.queryId}: the worker that took it is gone`);
          const status = statusOf('WORKER_LOST', WORKER_LOST_REASON);
          if (job.retain) {
            // Best effort: the client is told either way; what is left lapses with its TTL.
            await this.failKept(job.queryId, status).catch((err: Error) => {
              this.logger.warn(`query ${job.queryId}: its kept result stays: ${err.message}`);
            });
          }
          return { kind: 'error', status };
        }
        default:
          // The job ended; its final record may have been written just after our last read.
          if (!endedOnce) {
            endedOnce = true;
            return undefined;
          }
          this.logger.warn(
            `query ${job.queryId}: job is ${state} but its stream ended without a status`,
          );
          return { kind: 'error', status: statusOf('WORKER_LOST') };
      }
    };
  }
}
