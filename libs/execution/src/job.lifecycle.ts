import { Logger } from '@nestjs/common';
import {
  ERROR_CATALOGUE,
  ExecuteJobData,
  Status,
  finalState,
  pastLatestStart,
  statusOf,
} from '@app/contracts';
import { QueryFacts, ResultSink } from '@app/transport';
import { QueryLifecycle, QueryRef } from './query.lifecycle';
import { ExecutionOutcome } from './tasks/query.runner';

/**
 * A job that waited this long (ms) is asked whether its reader is still there before it starts.
 * A reader's alive key lives seconds after its api's last beat, so a shorter wait cannot have
 * outlived it: most jobs start without the round trip.
 */
const READER_CHECK_AFTER_MS = 1_000;

/**
 * How long a job runs before it is recorded `running` (ms). A shorter one goes from queued to its
 * end in one registry write (its final record tells the api when it started): most statements
 * end well within it, and a registry write less for each of them is Redis work a small query
 * does not need.
 */
export const RUNNING_AFTER_MS = 100;

/**
 * What a worker records around each job, whichever transport it runs on: the queue-wait limit
 * before it starts, `running` once it has run RUNNING_AFTER_MS, the final state (with when it
 * started) when it ends. A job that ends with no writer of its own (it never started, or its task
 * died) is ended through the sink. While a job runs, its owner's slot is renewed here: a query
 * nobody reads (answered 202) has no api to keep it, and must count against its owner until it
 * ends, not for one lease.
 */
export class JobLifecycle {
  private readonly logger = new Logger(JobLifecycle.name);
  /**
   * Jobs started here and not ended yet: when they started, their pending `running` write, and
   * whose slot they hold (renewed while they run).
   */
  private readonly started = new Map<
    string,
    { at: number; timer: NodeJS.Timeout; query: QueryRef }
  >();
  private renewer: NodeJS.Timeout | undefined;
  private renewFailed = false;

  constructor(
    private readonly lifecycle: QueryLifecycle,
    private readonly sink: ResultSink,
    private readonly runningAfterMs = RUNNING_AFTER_MS,
    /** Running jobs' slots are renewed this often: by default three tries per lease. */
    private readonly renewEveryMs = lifecycle.slotLeaseMs / 3,
  ) {}

  /**
   * False (and the query is ended) when the job waited past its latest start, or — for a job
   * `takenBefore` (put off once: a cancel then may not have reached the queue) — when a cancel
   * was asked for it, or when the api that would read its result died while it waited.
   */
  async start(
    job: ExecuteJobData,
    { takenBefore = false }: { takenBefore?: boolean } = {},
  ): Promise<boolean> {
    const status = pastLatestStart(job)
      ? statusOf('TIME_LIMIT', 'query waited too long in the queue')
      : takenBefore && (await this.sink.cancelAsked(job.queryId))
        ? statusOf('CANCELLED')
        : // A statement nobody waits for would still run (and commit) before its first poll.
          job.kept === undefined &&
            Date.now() - job.enqueuedAt >= READER_CHECK_AFTER_MS &&
            (await this.sink.readerGone(job.queryId))
          ? statusOf('CANCELLED', 'nobody waits for the result: the api reading it stopped')
          : undefined;
    if (status) {
      await this.sink.end(job.queryId, { kind: 'error', status });
      await this.ended(job, status);
      return false;
    }
    const at = Date.now();
    // transition() never throws (a failed step is logged); a `running` that lands after the end
    // is refused by the registry's transitions.
    const timer = setTimeout(
      () => void this.lifecycle.transition(queryOf(job), 'running', { startedAt: at }),
      this.runningAfterMs,
    );
    this.started.set(job.queryId, { at, timer, query: queryOf(job) });
    this.renewer ??= setInterval(() => this.renewAll(), this.renewEveryMs).unref();
    return true;
  }

  async finish(job: ExecuteJobData, outcome: ExecutionOutcome): Promise<void> {
    // The thread that ran it has no logger of its own.
    if (outcome.cause && outcome.status.vendor_code === ERROR_CATALOGUE.INTERNAL.vendorCode) {
      this.logger.error(`query ${job.queryId}: internal error: ${outcome.cause}`);
    } else if (outcome.cause) {
      this.logger.warn(`query ${job.queryId}: ${outcome.cause}`);
    }
    if (outcome.recorded) {
      // Its thread recorded the end with the result's last entry; the api that reads that entry
      // frees the owner's slot (if none does, the slot's lease lapses).
      this.forget(job);
      return;
    }
    await this.ended(job, outcome.status, {
      rows: outcome.rows,
      bytes: outcome.bytes,
      rowsProduced: outcome.rows,
      bytesProduced: outcome.bytes,
      streamingAt: outcome.streamingAt,
    });
  }

  /** The job may not run (its user's session ended while it waited): end the stream, record it. */
  async refused(job: ExecuteJobData, status: Status): Promise<ExecutionOutcome> {
    await this.sink.end(job.queryId, { kind: 'error', status });
    const outcome = { status, rows: 0, bytes: 0 };
    await this.finish(job, outcome);
    return outcome;
  }

  /**
   * The pool itself failed: end the stream so that the client learns, and record it. A thread
   * that died (out of memory, or exited) takes every query it ran with it, other users' too:
   * theirs is the worker's loss (503, worth a retry), not an error of their own.
   */
  async crashed(job: ExecuteJobData, err?: unknown): Promise<void> {
    const lost = threadLoss(err);
    const status = lost ? statusOf('WORKER_LOST', lost) : statusOf('INTERNAL');
    // The channel itself may be what failed: the api then notices the silence and ends the query.
    await this.sink.end(job.queryId, { kind: 'error', status }).catch(() => undefined);
    await this.ended(job, status);
  }

  /** Stops renewing (shutdown): the slots of jobs still running lapse one lease later. */
  close(): void {
    for (const { timer } of this.started.values()) clearTimeout(timer);
    this.started.clear();
    this.stopRenewing();
  }

  private async ended(job: ExecuteJobData, status: Status, progress?: QueryFacts): Promise<void> {
    const started = this.forget(job);
    await this.lifecycle.transition(queryOf(job), finalState(status), {
      status,
      startedAt: started?.at,
      ...progress,
    });
  }

  /** Stops the job's pending `running` write and its slot's renewal; when it started, if it did. */
  private forget(job: ExecuteJobData): { at: number } | undefined {
    const started = this.started.get(job.queryId);
    if (!started) return undefined;
    clearTimeout(started.timer);
    this.started.delete(job.queryId);
    if (this.started.size === 0) this.stopRenewing();
    return started;
  }

  /** Renews the slots of the jobs running here; one timer for all of them. */
  private renewAll(): void {
    for (const { query } of this.started.values()) {
      this.lifecycle.keepSlot(query).then(
        () => (this.renewFailed = false),
        (err: Error) => {
          // The next round tries again; if none succeeds, the slot lapses one lease later.
          if (!this.renewFailed) {
            this.logger.warn(`query ${query.queryId}: could not renew its slot: ${err.message}`);
          }
          this.renewFailed = true;
        },
      );
    }
  }

  private stopRenewing(): void {
    clearInterval(this.renewer);
    this.renewer = undefined;
  }
}

function queryOf(job: ExecuteJobData): QueryRef {
  return { queryId: job.queryId, owner: job.username };
}

/** Why a task failed with its thread, as piscina reports it, or undefined for another failure. */
export function threadLoss(err: unknown): string | undefined {
  if ((err as { code?: unknown } | null)?.code === 'ERR_WORKER_OUT_OF_MEMORY') {
    return 'the worker thread running the query ran out of memory';
  }
  if (err instanceof Error && /^worker exited with code/.test(err.message)) {
    return 'the worker thread running the query stopped';
  }
  return undefined;
}
