import { ConfigError, laneThreads, loadConfig } from './sluice.config';

/** How many threads each lane's pool has, and the connections that takes. */
describe(laneThreads.name, () => {
  const threads = (
    lanes: ('interactive' | 'export')[],
    workerThreads = 4,
    interactiveReserve = 1,
  ) => laneThreads({ workerThreads, interactiveReserve, lanes });

  it('gives a lane served alone all the threads', () => {
    expect(threads(['interactive'])).toEqual({ interactive: 4, export: 0 });
    expect(threads(['export'])).toEqual({ interactive: 0, export: 4 });
  });

  it('gives the export lane threads of its own beside the interactive ones, at least one', () => {
    expect(threads(['interactive', 'export'])).toEqual({ interactive: 4, export: 3 });
    expect(threads(['interactive', 'export'], 4, 0)).toEqual({ interactive: 4, export: 4 });
    expect(threads(['interactive', 'export'], 1, 1)).toEqual({ interactive: 1, export: 1 });
    expect(threads(['interactive', 'export'], 2, 5)).toEqual({ interactive: 2, export: 1 });
  });

  it('asks for a statement connection per task of every pool', () => {
    const base = {
      DATABASE_URL: 'postgresql://127.0.0.1/test',
      SLUICE_WORKER_THREADS: '2',
      SLUICE_TASKS_PER_THREAD: '4',
    };
    // Standalone (no Redis): both lanes, 2 + 1 threads, 12 tasks.
    expect(loadConfig({ ...base }).pgMaxConnections).toBe(32);
    expect(() => loadConfig({ ...base, SLUICE_PG_MAX_CONNECTIONS: '11' })).toThrow(ConfigError);
    expect(loadConfig({ ...base, SLUICE_PG_MAX_CONNECTIONS: '12' }).pgMaxConnections).toBe(12);
    // A worker serving one lane: its 8 tasks.
    const worker = { ...base, REDIS_URL: 'redis://127.0.0.1:6379', SLUICE_WORKER_LANES: 'export' };
    expect(loadConfig({ ...worker, SLUICE_PG_MAX_CONNECTIONS: '8' }).pgMaxConnections).toBe(8);
    expect(() => loadConfig({ ...worker, SLUICE_PG_MAX_CONNECTIONS: '7' })).toThrow(ConfigError);
  });
});
