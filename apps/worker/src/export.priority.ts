import { getPriority, setPriority } from 'node:os';
import { SluiceConfig } from '@app/config';

/**
 * A worker serving only the export lane gives way to interactive work on the same machine: it
 * lowers its priority to nice SLUICE_EXPORT_WORKER_NICE, from the main thread before any pool
 * thread is made (on Linux a nice value is a thread's, and a new thread inherits its maker's).
 * Lowering needs no privilege. Returns the nice value it runs at, if it is export-only.
 */
export function lowerExportPriority(
  config: Pick<SluiceConfig, 'workerLanes' | 'exportWorkerNice'>,
): number | undefined {
  const exportOnly = config.workerLanes.length === 1 && config.workerLanes[0] === 'export';
  if (!exportOnly || config.exportWorkerNice === 0) return undefined;
  // Already as low or lower (started niced): left so, since raising it would need a privilege.
  if (getPriority() < config.exportWorkerNice) setPriority(config.exportWorkerNice);
  return getPriority();
}
