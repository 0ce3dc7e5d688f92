import { Status } from './status';

/** One column of a result, as the spec's `schema` array shows it. */
export interface Column {
  name: string;
  type: string;
}

/**
 * A piece of a kept result's body written to the spool (SLUICE_SPOOL_URL): its key in the store,
 * where it starts in the body, and its length. Its bytes are in the store, not in the record.
 */
export interface SpooledSegment {
  key: string;
  offset: number;
  size: number;
}

/**
 * What a worker writes to a query's result channel, in order: `head`, any number of `data`,
 * then exactly one terminal record (`end`, or `error` when nothing was written before it). A
 * small result may come as its `end` alone, carrying the whole body and its `rows`.
 *
 * `segment` on a `data` record (whose `bytes` are then empty): the body's bytes it stands for are
 * in the spool, as that segment.
 *
 * `startedAt` and `streamingAt` on a terminal record: when its statement began, and when its first
 * rows came back from it and went to the channel (the query's streaming phase), for the registry.
 *
 * `recorded` on a terminal record: its producer recorded the query's end in the registry in the
 * same step as it wrote this record, so nobody who reads it need record the end again.
 */
export type ResultRecord =
  | { kind: 'head'; columns: Column[]; bytes: Buffer }
  | { kind: 'data'; rows: number; bytes: Buffer; segment?: SpooledSegment }
  | {
      kind: 'end';
      status: Status;
      bytes: Buffer;
      abort?: boolean;
      rows?: number;
      startedAt?: number;
      streamingAt?: number;
      recorded?: boolean;
    }
  | { kind: 'error'; status: Status; startedAt?: number; recorded?: boolean };

export function isTerminal(record: ResultRecord): boolean {
  return record.kind === 'end' || record.kind === 'error';
}

/** The body bytes a record stands for: its own, or its spooled segment's. */
export function bodyBytesOf(record: ResultRecord): number {
  if (record.kind === 'error') return 0;
  return record.bytes.length + (record.kind === 'data' ? (record.segment?.size ?? 0) : 0);
}
