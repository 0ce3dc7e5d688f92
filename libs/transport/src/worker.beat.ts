import { LANES, Lane } from '@app/contracts';

/** What a worker's heartbeat says: when it beat (epoch ms), and which lanes it serves. */
export interface WorkerBeat {
  at: number;
  lanes: Lane[];
}

/** A heartbeat's value in the workers hash: `<ms> <lane>,<lane>`. */
export function workerBeat(at: number, lanes: readonly Lane[]): string {
  return `${at} ${lanes.join(',')}`;
}

/**
 * Reads a heartbeat's value. A bare time is a worker from before lanes: it takes jobs from the
 * interactive lane's queue (the one queue there was) only.
 */
export function readWorkerBeat(value: string): WorkerBeat {
  const [at, lanes] = value.split(' ');
  return {
    at: Number(at),
    lanes:
      lanes === undefined
        ? ['interactive']
        : LANES.filter((lane) => lanes.split(',').includes(lane)),
  };
}
