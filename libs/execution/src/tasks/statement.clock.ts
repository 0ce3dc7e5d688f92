import { performance } from 'node:perf_hooks';

/**
 * When a run's phases happened (epoch ms, sub-millisecond): plain data, handed back to the thread
 * pool's caller, which makes the statement's spans from it (the threads load no tracing SDK).
 */
export interface StatementTimings {
  /** The thread took the task. */
  startedAt: number;
  /** The connection is being taken and the statement sent. */
  statementAt?: number;
  /** Its first rows came back (or its end, for a statement without rows). */
  firstRowsAt?: number;
  /** Committed, or abandoned on failure. */
  statementEndAt?: number;
  /** The result's last byte and status written. */
  endAt?: number;
  /** Time spent encoding rows, all batches together (ms). */
  encodeMs: number;
}

type Mark = 'statementAt' | 'firstRowsAt' | 'statementEndAt' | 'endAt';

/** Measures one run for its trace; only a traced job has one. */
export class StatementClock {
  private readonly measured: StatementTimings = { startedAt: StatementClock.now(), encodeMs: 0 };

  static now(): number {
    return performance.timeOrigin + performance.now();
  }

  mark(phase: Mark): void {
    this.measured[phase] = StatementClock.now();
  }

  /** Runs an encoder's step, adding its time to encodeMs. */
  encoding<T>(step: () => T): T {
    const start = performance.now();
    try {
      return step();
    } finally {
      this.measured.encodeMs += performance.now() - start;
    }
  }

  timings(): StatementTimings {
    return { ...this.measured };
  }
}
