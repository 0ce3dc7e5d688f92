import { ProducerStoppedError, ResultWriter, StopReason } from '@app/transport';

/**
 * The one way a statement is told to stop, whatever the cause: its client cancels or goes (the
 * result writer's watch), or its time limit passes. The first reason is the statement's; later
 * ones change nothing. Stopping interrupts the writer, so that a write waiting for the client
 * gives up, and calls `onStop` once, to stop the statement where it runs in PostgreSQL.
 *
 * Its life: the client and the time limit are watched from construction; `settle()` (the
 * statement's outcome is known) stops watching the client; `committed()` and `dispose()` stop
 * watching both.
 */
export class StatementStop {
  private first: StopReason | undefined;
  private unwatchClient: (() => void) | undefined;
  private deadline: NodeJS.Timeout | undefined;

  constructor(
    private readonly writer: ResultWriter,
    timeoutMs: number | undefined,
    private readonly onStop: (reason: StopReason) => void,
  ) {
    // The writer may call back before watch() returns (a cancel that came first): stop() needs
    // nothing that is set after this line.
    this.unwatchClient = writer.watch((reason) => this.stop(reason));
    if (timeoutMs) this.deadline = setTimeout(() => this.stop('timeout'), timeoutMs);
  }

  /** The first reason to stop, if any came. */
  get reason(): StopReason | undefined {
    return this.first;
  }

  /** Throws ProducerStoppedError when told to stop: a stopped statement asks PostgreSQL nothing more. */
  throwIfStopped(): void {
    if (this.first) throw new ProducerStoppedError(this.first);
  }

  /**
   * The statement committed or failed: what its client does no longer changes how it ends. The
   * time limit still holds until `dispose()`, over the writing of the end to a slow client.
   */
  settle(): void {
    this.unwatchClient?.();
    this.unwatchClient = undefined;
  }

  /**
   * The statement committed: its time limit no longer applies. A committed result is delivered
   * whole; a client too slow to take its end meets the writer's idle limit
   * (SLUICE_CLIENT_IDLE_TIMEOUT_MS), never TIME_LIMIT for a statement that took effect.
   */
  committed(): void {
    this.dispose();
  }

  /** Watches nothing any more; a second call does nothing. */
  dispose(): void {
    this.settle();
    clearTimeout(this.deadline);
    this.deadline = undefined;
  }

  private stop(reason: StopReason): void {
    if (this.first) return;
    this.first = reason;
    this.writer.interrupt(reason);
    this.onStop(reason);
  }
}
