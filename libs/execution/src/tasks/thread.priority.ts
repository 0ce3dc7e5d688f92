import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';

/**
 * Lowers the calling thread's priority to `nice`, where the OS allows one thread its own (Linux:
 * a nice value is a thread's, found by its id in /proc/thread-self). Elsewhere the thread keeps
 * its priority: returns false. Lowering needs no privilege; raising it again would.
 */
export function lowerThreadPriority(nice: number): boolean {
  let tid: number;
  try {
    tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
  } catch {
    return false;
  }
  setPriority(tid, nice);
  return true;
}
