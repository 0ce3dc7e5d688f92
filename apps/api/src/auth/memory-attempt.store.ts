import { AttemptCount, AttemptStore } from './attempt.store';

const MAX_KEYS = 100_000;

/**
 * Failed logins counted in this process: exact in standalone mode (one process). Bounded, so a
 * flood of made-up user names cannot grow it without end.
 */
export class MemoryAttemptStore implements AttemptStore {
  private readonly counts = new Map<string, { failures: number; resetAt: number }>();

  get(key: string): Promise<AttemptCount> {
    const entry = this.live(key);
    return Promise.resolve(
      entry
        ? { failures: entry.failures, resetInMs: entry.resetAt - Date.now() }
        : { failures: 0, resetInMs: 0 },
    );
  }

  add(key: string, windowSeconds: number): Promise<void> {
    const entry = this.live(key);
    if (entry) {
      entry.failures += 1;
    } else {
      if (this.counts.size >= MAX_KEYS) this.evict();
      this.counts.set(key, { failures: 1, resetAt: Date.now() + windowSeconds * 1000 });
    }
    return Promise.resolve();
  }

  clear(key: string): Promise<void> {
    this.counts.delete(key);
    return Promise.resolve();
  }

  private live(key: string): { failures: number; resetAt: number } | undefined {
    const entry = this.counts.get(key);
    if (entry && entry.resetAt <= Date.now()) {
      this.counts.delete(key);
      return undefined;
    }
    return entry;
  }

  // Expired entries first; if none, the oldest (a Map iterates in insertion order).
  private evict(): void {
    const now = Date.now();
    for (const [key, entry] of this.counts) if (entry.resetAt <= now) this.counts.delete(key);
    if (this.counts.size >= MAX_KEYS) {
      const oldest = this.counts.keys().next();
      if (!oldest.done) this.counts.delete(oldest.value);
    }
  }
}
