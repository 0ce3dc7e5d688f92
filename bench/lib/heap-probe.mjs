// Preloaded into a Sluice process by bench/memory-growth.mjs (NODE_OPTIONS=--expose-gc --import):
// every HEAP_PROBE_EVERY_MS, in the main thread and in each worker thread, a full garbage
// collection and then one line — the isolate's live heap and the process's RSS — appended to
// HEAP_PROBE_DIR/<pid>.log. What survives a full collection is what the process holds.
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { getHeapStatistics } from 'node:v8';
import { isMainThread, threadId } from 'node:worker_threads';

const dir = process.env.HEAP_PROBE_DIR;
if (dir) {
  const file = join(dir, `${process.pid}.log`);
  const thread = isMainThread ? 'main' : `thread-${threadId}`;
  setInterval(
    () => {
      globalThis.gc?.();
      const heap = getHeapStatistics().used_heap_size;
      appendFileSync(file, `${Date.now()} ${thread} ${heap} ${process.memoryUsage.rss()}\n`);
    },
    Number(process.env.HEAP_PROBE_EVERY_MS ?? 2000),
  ).unref();
}
