import { Readable } from 'node:stream';

/** A started execution: its streamed body. */
export interface ExecutionResponse {
  queryId: string;
  contentType: string;
  contentEncoding?: string;
  /** 200 unless said otherwise (202 for a query answered before its result). */
  httpStatus?: number;
  headers?: Record<string, string>;
  /** A Buffer when the whole result came before the response started: sent with its length. */
  body: Readable | Buffer;
  /**
   * Releases what the execution holds (and cancels the query unless it ended); idempotent. The
   * response's close event must call it: a body destroyed before its first read never runs.
   */
  close(): Promise<void>;
}
