import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/**
 * Lowers the calling thread's priority to `nice`, where the OS gives one thread its own (Linux: a
 * nice value is a thread's, found by its id in /proc/thread-self). A thread already as low or
 * lower is left as it is: raising a priority needs a privilege. Returns false where the thread
 * keeps its priority because the OS has no per-thread one, or refused.
 */
export function lowerThreadPriority(nice: number): boolean {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (getPriority(tid) < nice) setPriority(tid, nice);
    return true;
  } catch {
    return false;
  }
}
