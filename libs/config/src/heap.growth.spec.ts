import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';
import { heapGrowth, setHeapGrowth } from './heap.growth';

/**
 * A thread that keeps promoting and dropping objects (a ring of 200,000 that turns over 15
 * times), counting its mark-compacts. Set at run time, the growth decides how often it makes one.
 */
const WORKLOAD = `
const { PerformanceObserver, constants } = require('node:perf_hooks');
const { parentPort } = require('node:worker_threads');
let majors = 0;
const observer = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) if (entry.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majors++;
});
observer.observe({ entryTypes: ['gc'] });
const ring = new Array(200000);
for (let n = 0, i = 0; n < 3000000; n++, i = (i + 1) % ring.length) ring[i] = { a: n, b: [n, n], c: 'x' + n };
setTimeout(() => { observer.disconnect(); parentPort.postMessage(majors); }, 50);`;

function markCompacts(): Promise<number> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKLOAD, { eval: true });
    worker.once('message', (n: number) => void worker.terminate().then(() => resolve(n)));
    worker.once('error', reject);
  });
}

afterAll(() => setFlagsFromString('--heap-growing-percent=0'));

describe(setHeapGrowth.name, () => {
  it('sets how far the old generation grows between mark-compacts, for threads of the running process', async () => {
    setHeapGrowth(10);
    const tight = await markCompacts();
    setHeapGrowth(1_000);
    const loose = await markCompacts();
    expect(heapGrowth()).toBe(1_000);
    expect(tight).toBeGreaterThanOrEqual(3 * Math.max(1, loose));
  }, 30_000);

  it('sets nothing at 0, so that a process started with it keeps V8 its own choice', async () => {
    setHeapGrowth(10);
    setHeapGrowth(0);
    // Still the tight growth set before: 0 did not touch the flag.
    expect(await markCompacts()).toBeGreaterThanOrEqual(3);
  }, 30_000);
});
