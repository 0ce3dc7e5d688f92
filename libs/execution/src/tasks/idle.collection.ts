import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** Result bytes a thread's statements produce, since its last collection, before it collects. */
export const COLLECT_AFTER_BYTES = 32 * 1024 * 1024;
/** How long a thread must have had no statement running before it collects (ms). */
export const COLLECT_IDLE_MS = 200;

/**
 * V8's full collection as a function: the process's own `gc` when it was started with
 * `--expose-gc`, else one exposed as jest exposes it for its heap reports (the flag set, then
 * `gc` taken from a new context). Undefined if neither works: nothing is collected then.
 */
export function exposedGc(): (() => void) | undefined {
  const own = (globalThis as { gc?: unknown }).gc;
  if (typeof own === 'function') return own as () => void;
  try {
    setFlagsFromString('--expose-gc');
    const gc: unknown = runInNewContext('gc');
    return typeof gc === 'function' ? (gc as () => void) : undefined;
  } catch {
    // A V8 that refuses the flag: the thread is left to V8's own collections, as before.
    return undefined;
  }
}

/**
 * A pool thread's full collection once it is idle after large results. A result of a million
 * rows leaves its thread's heap tens of MB of garbage (the rows read, their encodings, the
 * entries written), which V8 leaves in place while nothing else allocates: the worker's RSS
 * stayed ≈ 45 MB higher after a few large results than with a collection between them
 * (bench/RESULTS.md), and the next export's peak stood on top of it. So when the statements of
 * a thread have produced `afterBytes` since its last collection and none has run for `idleMs`,
 * it collects once (a few ms on a heap that holds little then); a statement that starts
 * meanwhile puts it off until the thread is idle again. Small queries add up to `afterBytes`
 * only over tens of thousands of them, and a busy thread is never idle that long.
 */
export class IdleCollection {
  private running = 0;
  private produced = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly collect: (() => void) | undefined = exposedGc(),
    private readonly limits = { afterBytes: COLLECT_AFTER_BYTES, idleMs: COLLECT_IDLE_MS },
  ) {}

  /** A statement starts on the thread. */
  started(): void {
    this.running++;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** A statement ended, having produced `bytes`. */
  ended(bytes: number): void {
    this.running--;
    this.produced += bytes;
    if (this.running > 0 || this.produced < this.limits.afterBytes || !this.collect) return;
    const collect = this.collect;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.produced = 0;
      collect();
    }, this.limits.idleMs);
    // Never what keeps a thread alive.
    this.timer.unref();
  }
}
