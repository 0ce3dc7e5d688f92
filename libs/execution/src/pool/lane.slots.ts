import { Lane } from '@app/contracts';
import { SluiceConfig } from '@app/config';

/** How many jobs a pool runs at once, all lanes together, and of those how many export jobs. */
export interface LaneLimits {
  total: number;
  export: number;
  /**
   * False when the pool has no thread beyond the interactive reserve: export jobs then run one
   * at a time on the threads interactive jobs use.
   */
  reserveKept: boolean;
}

/**
 * The limits of a pool serving `lanes`: a pool serving both keeps SLUICE_WORKER_INTERACTIVE_RESERVE
 * threads' worth of task slots out of export work's reach; one serving a single lane gives it all.
 */
export function laneLimits(
  config: Pick<SluiceConfig, 'workerThreads' | 'tasksPerThread' | 'interactiveReserve'>,
  lanes: readonly Lane[],
): LaneLimits {
  const total = config.workerThreads * config.tasksPerThread;
  if (!lanes.includes('export')) return { total, export: 0, reserveKept: true };
  if (!lanes.includes('interactive')) return { total, export: total, reserveKept: true };
  const exportThreads = config.workerThreads - config.interactiveReserve;
  if (exportThreads < 1) return { total, export: 1, reserveKept: false };
  return { total, export: exportThreads * config.tasksPerThread, reserveKept: true };
}

/** What a pool serving both lanes logs at start when it cannot keep the reserve. */
export function reserveNotKept(
  config: Pick<SluiceConfig, 'workerThreads' | 'interactiveReserve'>,
): string {
  return `SLUICE_WORKER_THREADS (${config.workerThreads}) leaves no thread beyond SLUICE_WORKER_INTERACTIVE_RESERVE (${config.interactiveReserve}): export jobs run one at a time, on the threads interactive jobs use`;
}

/**
 * The jobs a pool runs, by lane, and how many each lane's queue consumer may hold now: never
 * more than the slots the other lane leaves free, export never more than its limit. So a job
 * is only taken when a slot can run it at once, and other workers get the rest.
 */
export class LaneSlots {
  private readonly running: Record<Lane, number> = { interactive: 0, export: 0 };

  constructor(readonly limits: LaneLimits) {}

  started(lane: Lane): void {
    this.running[lane] += 1;
  }

  ended(lane: Lane): void {
    this.running[lane] -= 1;
  }

  /** At least 1 (a BullMQ worker's least): a job taken then waits for a slot in the pool. */
  concurrency(lane: Lane): number {
    const other: Lane = lane === 'export' ? 'interactive' : 'export';
    const cap = lane === 'export' ? this.limits.export : this.limits.total;
    return Math.max(1, Math.min(cap, this.limits.total - this.running[other]));
  }
}
