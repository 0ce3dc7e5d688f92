import { createHook } from 'node:async_hooks';

/** Node's Timeout object: `_destroyed` once it has fired (one-shot) or been cleared. */
interface TimeoutResource {
  _destroyed?: boolean;
}

/** Timers and intervals created since `trackTimers()`, outside jest's own code. */
export interface TimerTracker {
  /** How many of them are still pending (an interval stays pending until cleared). */
  pending(): number;
  /** Where each pending one was created (for a failure message). */
  stacks(): string[];
  stop(): void;
}

/**
 * Counts the timers and intervals the code under test leaves behind. Node's own count
 * (`process.getActiveResourcesInfo()`) also holds jest's reporter timers, which come and go.
 */
export function trackTimers(): TimerTracker {
  const created = new Map<TimeoutResource, string>();
  const hook = createHook({
    init(_id, type, _trigger, resource) {
      if (type !== 'Timeout') return;
      // Who called setTimeout/setInterval: the first frame outside Node and this file.
      const stack = new Error().stack ?? '';
      const caller = stack
        .split('\n')
        .slice(1)
        .find((line) => !line.includes('node:') && !line.includes(__filename));
      // Node's own (socket timeouts, keep-alive) and jest's are not the code under test's.
      if (!caller || /[\\/](@jest|jest-[a-z-]+)[\\/]/.test(caller)) return;
      // Nor the Date header's cache, which Node's http renews at most once a second for whichever
      // response writes its head then (an unref'd timer of its own, found once in CI).
      if (stack.includes('at utcDate (node:internal/http:')) return;
      created.set(resource, stack);
    },
  }).enable();
  return {
    pending: () => [...created.keys()].filter((t) => t._destroyed !== true).length,
    stacks: () => [...created].filter(([t]) => t._destroyed !== true).map(([, stack]) => stack),
    stop: () => hook.disable(),
  };
}
