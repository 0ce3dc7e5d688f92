import { Counter, Gauge, Registry } from 'prom-client';
import { QueryPoolService } from './query-pool.service';

/** The thread pool's Prometheus gauges, for whichever process runs it (worker, or standalone api). */
export function registerPoolMetrics(registry: Registry, pool: QueryPoolService): void {
  const registers = [registry];
  const utilization: Gauge = new Gauge({
    name: 'sluice_pool_utilization',
    help: 'Share of the thread pool’s capacity in use since it started (piscina utilization, 0-1).',
    registers,
    collect: () => utilization.set(pool.stats.utilization),
  });
  const queued: Gauge = new Gauge({
    name: 'sluice_pool_queue_size',
    help: 'Tasks waiting for a free thread slot.',
    registers,
    collect: () => queued.set(pool.stats.queueSize),
  });
  const threads: Gauge = new Gauge({
    name: 'sluice_pool_threads',
    help: 'Threads in the pool.',
    registers,
    collect: () => threads.set(pool.stats.threads),
  });
  new Gauge({
    name: 'sluice_pool_capacity',
    help: 'Queries the pool runs at once (threads × tasks per thread).',
    registers,
  }).set(pool.capacity());
  const connections: Gauge = new Gauge({
    name: 'sluice_pg_connections',
    help: 'Statement connections to PostgreSQL open in the pool’s threads, all logins together.',
    registers,
    collect: () => connections.set(pool.pgConnections),
  });
  new Gauge({
    name: 'sluice_pg_max_connections',
    help: 'The most statement connections the pool’s threads may hold (SLUICE_PG_MAX_CONNECTIONS).',
    registers,
  }).set(pool.pgMaxConnections);
  countOf(registry, {
    name: 'sluice_pool_tasks_completed_total',
    help: 'Tasks the pool finished (statements run, and start-up checks).',
    total: () => pool.stats.completed,
  });
  countOf(registry, {
    name: 'sluice_pool_idle_collections_total',
    help: 'Full garbage collections the pool’s threads ran once idle after large results.',
    total: () => pool.stats.idleCollections,
  });
}

/** A counter that follows a total kept elsewhere, read at each scrape. */
function countOf(
  registry: Registry,
  { name, help, total }: { name: string; help: string; total: () => number },
): void {
  let seen = 0;
  const counter: Counter = new Counter({
    name,
    help,
    registers: [registry],
    collect: () => {
      const now = total();
      if (now > seen) counter.inc(now - seen);
      seen = now;
    },
  });
}

/**
 * What a process running the pool adds to its sluice_spool_errors_total on each scrape: the kept
 * results the spool refused to take since the last (`write`). Call it from the counter's collect.
 */
export function spoolWriteErrorsOf(pool: QueryPoolService): (errors: Counter<'operation'>) => void {
  let seen = 0;
  return (errors) => {
    const now = pool.stats.spoolWriteErrors;
    if (now > seen) errors.inc({ operation: 'write' }, now - seen);
    seen = now;
  };
}
