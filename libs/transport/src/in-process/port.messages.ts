import { ResultRecord } from '@app/contracts';

/** Producer → consumer over a MessagePort: one record. */
export interface RecordMessage {
  type: 'record';
  record: ResultRecord;
}

/** Producer → consumer over a MessagePort: what the query has produced so far (now and then). */
export interface ProgressMessage {
  type: 'progress';
  rows: number;
  bytes: number;
  streamingAt?: number;
}

/** Consumer → producer: how many records it has taken so far, or a request to stop. */
export type ControlMessage = { type: 'ack'; taken: number } | { type: 'cancel' };

/** Buffers arrive as Uint8Array after structured cloning; turn them back without copying. */
export function reviveRecord(record: ResultRecord): ResultRecord {
  if (record.kind === 'error') return record;
  const bytes = record.bytes as Uint8Array;
  return {
    ...record,
    bytes: Buffer.isBuffer(bytes)
      ? bytes
      : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
  };
}
