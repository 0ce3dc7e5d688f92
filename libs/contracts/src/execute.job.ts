/** Name of the BullMQ queue that carries executions. */
export const EXECUTE_QUEUE = 'execute';

export type ResultFormat = 'json' | 'ndjson' | 'csv' | 'parquet' | 'arrow';
export type ResultLayout = 'array' | 'collection';
export type ContentEncoding = 'gzip' | 'br';

/** Everything a worker needs to run one statement; plain data (structured-clone safe). */
export interface ExecuteJobData {
  queryId: string;
  /** Statement text with `{name}` placeholders already turned into $n. */
  text: string;
  values: (string | null)[];
  types: number[];
  username: string;
  role: string;
  readOnly: boolean;
  database?: string;
  schema?: string;
  format: ResultFormat;
  layout: ResultLayout;
  /** Rows per chunk; 0 lets the server pick. */
  fetchSize: number;
  maxRows?: number;
  encoding?: { name: ContentEncoding; level: number };
  enqueuedAt: number;
}
