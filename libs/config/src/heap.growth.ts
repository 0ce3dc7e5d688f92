import { setFlagsFromString } from 'node:v8';

let applied = 0;

/**
 * Lets this process's old generation grow `percent` past what each mark-compact kept before the
 * next one (V8's `--heap-growing-percent`), for the main thread and every thread made after.
 * V8 reads the setting at each mark-compact, so it may be set once the process runs. 0 leaves
 * V8's own choice, which under load kept the api's and the worker threads' small heaps (tens of
 * MB) mark-compacted every second or two, each pause up to 20 ms (docs/architecture.md).
 */
export function setHeapGrowth(percent: number): void {
  if (percent > 0) setFlagsFromString(`--heap-growing-percent=${percent}`);
  applied = percent;
}

/** What setHeapGrowth set in this process; 0 when V8 decides (or it was never called). */
export function heapGrowth(): number {
  return applied;
}

/** The /metrics gauge of what setHeapGrowth set, for prom-client's Gauge (api and worker). */
export function heapGrowthGauge(): {
  name: string;
  help: string;
  collect(this: { set(value: number): void }): void;
} {
  return {
    name: 'sluice_heap_growing_percent',
    help: 'How far past what a mark-compact kept this process lets its old generation grow (SLUICE_HEAP_GROWING_PERCENT, set at start; 0: V8 decides).',
    collect() {
      this.set(heapGrowth());
    },
  };
}
