import type { LoggerService } from '@nestjs/common';
import type { PgLogin } from '@app/access';
import type { TracingSettings } from '@app/config';
import { ExecuteJobData } from '@app/contracts';
import { JobLifecycle } from './job.lifecycle';
import { JobTrace } from './job.trace';
import type { JobLogin } from './session-login.resolver';
import type { TaskTrace } from './tasks/execute-query.task';
import type { ExecutionOutcome } from './tasks/query.runner';

/** Runs a job's statement in a pool, as its login, with its trace (given when it is traced). */
export type PoolRun = (
  login: PgLogin | undefined,
  trace: TaskTrace | undefined,
) => Promise<ExecutionOutcome>;

/** What the runner asks of each job's transport. */
export interface JobRunnerOptions {
  /** The job's own login, or why it may not run (SessionLoginResolver). */
  resolve: (job: ExecuteJobData) => Promise<JobLogin>;
  /** Where jobs were queued, for their traces (messaging.system), and what traces need. */
  tracing: { system: string; settings?: TracingSettings; database?: string };
  logger: LoggerService;
}

/**
 * Takes a job through its life in a worker (BullMQ's or standalone mode's in-process queue): it
 * starts (unless it waited too long, or was cancelled), runs as its user's login or is refused
 * (the user's session ended while it waited), and ends, however it ends, in the registry and on
 * its result channel, with a trace of it all when it is traced.
 */
export class JobRunner {
  constructor(
    private readonly lifecycle: JobLifecycle,
    private readonly options: JobRunnerOptions,
  ) {}

  /**
   * Runs `job` with `run`; undefined when it never started. A job `takenBefore` (put off once)
   * looks for a cancel first. A failure of the pool (a thread lost) ends the query and is thrown.
   */
  async run(
    job: ExecuteJobData,
    run: PoolRun,
    taken: { takenBefore?: boolean } = {},
  ): Promise<ExecutionOutcome | undefined> {
    if (!(await this.lifecycle.start(job, taken))) return undefined;
    const traced = JobTrace.taken(job, this.options.tracing);
    try {
      const { login, refused } = await this.options.resolve(job);
      // The user's session ended while the query waited: it never runs.
      if (refused) {
        const outcome = await this.lifecycle.refused(job, refused);
        traced?.finished(outcome);
        return outcome;
      }
      const outcome = await run(login, traced?.statement());
      traced?.finished(outcome);
      await this.lifecycle.finish(job, outcome);
      return outcome;
    } catch (err) {
      traced?.finished(undefined);
      this.options.logger.error(
        `query ${job.queryId} failed in the pool: ${(err as Error).message}`,
      );
      await this.lifecycle.crashed(job, err);
      throw err;
    }
  }
}

/**
 * A shutdown's wait for the jobs running: `running` settles within `graceMs`, or `cancel` stops
 * what still runs and `running` is waited for then. True when the grace period ran out.
 */
export async function drainWithin(
  running: Promise<unknown>,
  graceMs: number,
  cancel: () => Promise<unknown>,
): Promise<boolean> {
  const grace = new Promise<'timeout'>((resolve) =>
    setTimeout(() => resolve('timeout'), graceMs).unref(),
  );
  if ((await Promise.race([running.then(() => 'done' as const), grace])) !== 'timeout') {
    return false;
  }
  await cancel();
  await running;
  return true;
}
