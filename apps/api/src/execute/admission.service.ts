import { Inject, Injectable } from '@nestjs/common';
import { Lane, SluiceError } from '@app/contracts';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { JobQueue, QuerySlots } from '@app/transport';
import { WorkerRosterService } from '../health/worker-roster.service';
import { JOB_QUEUE, QUERY_REGISTRY } from '../infra/tokens';

/** How long a reading of the queue's depth is used again: the global cap need not be exact. */
const QUEUE_DEPTH_TTL_MS = 100;
/** A user's first queries each have a dispatch class of their own; past them, one per doubling. */
const RANKED = 4;

/**
 * The dispatch priority (1 first) of a user's `n`-th concurrent query (queued or running): `n` up
 * to 4, then one class for each doubling (5–8, 9–16, 17–32 …); the queue is first come, first
 * served within a class. A priority is fixed when its job is queued. Were it `n` itself, a busy
 * user's count moving by one either way as its queries end and come would put each of its new
 * queries ahead of its own earlier ones queued at a count one higher: a closed loop of 32 clients
 * had a p99 1.6 times as long as with every job in one class (bench/RESULTS.md, 2026-12-06).
 * In classes, a user's own queries keep their order but at a class's edge, while a user with
 * fewer queries in flight still goes ahead of a busier one's surplus.
 */
export function dispatchPriority(n: number): number {
  return n <= RANKED ? n : RANKED + Math.ceil(Math.log2(n / RANKED));
}

/** When to try again after a 429: slots and queue places free up as queries end. */
const RETRY_AFTER: Readonly<Record<string, string>> = Object.freeze({ 'Retry-After': '1' });

/**
 * Whether a statement may be queued at all: a worker must be alive to run it, the queue must
 * have room (SLUICE_MAX_QUEUED), and its user a free slot (SLUICE_MAX_ACTIVE_PER_USER). The checks
 * come first; the slot is taken by the caller together with the query's record (one write).
 */
@Injectable()
export class AdmissionService {
  private queueDepth: { count: Promise<number>; at: number } = { count: Promise.resolve(0), at: 0 };

  constructor(
    @Inject(JOB_QUEUE) private readonly queue: JobQueue,
    @Inject(QUERY_REGISTRY) private readonly registry: QuerySlots,
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    private readonly workers: WorkerRosterService,
  ) {}

  /**
   * Whether the queue takes a query of `lane` now: a worker of its lane must be alive (no fresh
   * heartbeat: 503 at once rather than a wait for the queue limit) and the queue must have room.
   * Both readings are cached briefly, so this seldom waits for Redis.
   */
  async check(lane: Lane): Promise<void> {
    if (!(await this.workers.serving(lane))) throw this.workers.noWorker(lane);
    if ((await this.waiting()) >= this.config.maxQueued) {
      throw new SluiceError(
        'QUEUE_FULL',
        'the query queue is full; retry later',
        undefined,
        RETRY_AFTER,
      );
    }
  }

  /** Takes a slot of the user's for the query; returns the job's dispatch priority. */
  async takeSlot(username: string, queryId: string): Promise<number> {
    const before = await this.registry.admit(username, queryId, this.config.maxActivePerUser);
    if (before === undefined) {
      throw new SluiceError(
        'QUEUE_FULL',
        `you have ${this.config.maxActivePerUser} queries queued or running; retry when one ends`,
        undefined,
        RETRY_AFTER,
      );
    }
    return dispatchPriority(before + 1);
  }

  /**
   * Jobs waiting, all users together. The reading in flight is shared: every request that came
   * while it was on its way once sent a count of its own (two Lua scripts each).
   */
  private waiting(): Promise<number> {
    const now = Date.now();
    if (now - this.queueDepth.at > QUEUE_DEPTH_TTL_MS) {
      const count = this.queue.waitingCount();
      this.queueDepth = { count, at: now };
      // A failed reading is not used again.
      count.catch(() => {
        if (this.queueDepth.count === count) this.queueDepth = { count, at: 0 };
      });
    }
    return this.queueDepth.count;
  }
}
