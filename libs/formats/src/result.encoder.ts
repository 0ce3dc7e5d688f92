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
 * `end` returns null when the format cannot carry a failure after its first byte (the response
 * must then be aborted).
 */
export interface ResultEncoder {
  head(): Buffer;
  rows(rows: RowBatch): Buffer;
  end(status: Status, failed: boolean): Buffer | null;
}

export type { ResultFormat };
