import { Column, ResultFormat, ResultLayout, Status } from '@app/contracts';
import type { JsonValueForm } from '@app/sql';
import { RowBatch } from './row.batch';

export type { TextRow } from './row.batch';

/** One column as an encoder sees it. */
export interface EncoderColumn extends Column {
  oid: number;
  /** Turns a non-null text value into JSON text (to_json-exact). */
  json: (text: string) => string;
  /** How `json` treats the value's bytes, so that the JSON formats can copy them (JsonValueForm). */
  jsonForm?: JsonValueForm;
  /**
   * Set when to_json() makes an object of the column's values, or of its elements for an array
   * (composites, hstore): the columnar formats then carry them as JSON, made by `element` from
   * one value's (element's) text.
   */
  objectJson?: { list: boolean; element: (text: string) => string };
}

export interface EncoderOptions {
  queryId: string;
  layout: ResultLayout;
  columns: EncoderColumn[];
}

/**
 * Turns a result into the bytes of one response body, chunk by chunk. Pure: chunk in, bytes out.
 * `end` returns null for a failure (isFailure) when the format cannot carry one after its first
 * byte (the response must then be aborted).
 */
export interface ResultEncoder {
  head(): Buffer;
  /**
   * `rows` holds chunks of `chunkRows` rows each (the last may be shorter; default: one chunk): a
   * format that marks its chunks (stream+json's lines, Arrow's record batches) marks each.
   */
  rows(rows: RowBatch, chunkRows?: number): Buffer;
  end(status: Status): Buffer | null;
  /**
   * A Buffer rows() returned is no longer used by anyone (written, nothing keeps it): a later
   * rows() may give its memory out again. The text formats take it back; the others ignore it.
   */
  reuse?(chunk: Buffer): void;
}

export type { ResultFormat };

/** The bytes of `encode` over each chunk of `chunkRows` rows of `rows`, one after the other. */
export function eachChunk(
  rows: RowBatch,
  chunkRows: number,
  encode: (chunk: RowBatch) => Buffer,
): Buffer {
  if (rows.length <= chunkRows) return encode(rows);
  const parts: Buffer[] = [];
  for (let from = 0; from < rows.length; from += chunkRows) {
    const part = encode(rows.slice(from, from + chunkRows));
    if (part.length > 0) parts.push(part);
  }
  return parts.length === 1 ? parts[0] : Buffer.concat(parts);
}
