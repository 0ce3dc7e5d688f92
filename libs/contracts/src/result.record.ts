import { Status } from './status';

/** One column of a result, as the spec's `schema` array shows it. */
export interface Column {
  name: string;
  type: string;
}

/**
 * What a worker writes to a query's result channel, in order: `head`, any number of `data`,
 * then exactly one terminal record (`end`, or `error` when nothing was written before it). A
 * small result may come as its `end` alone, carrying the whole body and its `rows`.
 *
 * `recorded` on a terminal record: its producer recorded the query's end in the registry in the
 * same step as it wrote this record, so nobody who reads it need record the end again.
 */
export type ResultRecord =
  | { kind: 'head'; columns: Column[]; bytes: Buffer }
  | { kind: 'data'; rows: number; bytes: Buffer }
  | {
      kind: 'end';
      status: Status;
      bytes: Buffer;
      abort?: boolean;
      rows?: number;
      startedAt?: number;
      recorded?: boolean;
    }
  | { kind: 'error'; status: Status; startedAt?: number; recorded?: boolean };

export function isTerminal(record: ResultRecord): boolean {
  return record.kind === 'end' || record.kind === 'error';
}
